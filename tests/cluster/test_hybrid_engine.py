"""The hybrid engine (collocated placement: rollout engine and reference inside the trainer
process, weight sync in memory) learns exactly what separate rollout and reference workers
learn from the same seed, for control policies and for language models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.cluster import ray_cluster
from infra.driver.runtimes import make_runtime
from rl_core.config import RLPipeConfig, load_config
from rl_core.models.tiny_lm import create_tiny_lm
from tests.in_process import assert_same_weights, run_iterations
from tests.tiny_grpo import tiny_grpo_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray_cluster.connect(num_cpus=2)
    yield
    ray_cluster.shutdown()


def train(cfg: RLPipeConfig, iterations: int, state_method: str, retry_rollout_at: int = -1):
    """Train ``iterations`` in process; returns the trainer's weights and the runtime facts.

    At ``retry_rollout_at`` a rollout is run, undone (as before a retry) and run again.
    """
    runtime = make_runtime(cfg)
    try:
        facts: dict[str, Any] = {"hybrid": runtime.hybrid, "groups": len(runtime.groups)}
        steps = run_iterations(runtime, range(iterations), retry_rollout_at)[-1]
        facts["sync_bytes"] = steps["weight_sync"].metrics["rollout/weight_sync_bytes"]
        facts["versions"] = steps["weight_sync"].info["rollout_versions"]
        return getattr(runtime.actor, state_method)()[0], facts
    finally:
        runtime.shutdown()


def test_cartpole_hybrid_engine_learns_what_separate_rollout_workers_learn() -> None:
    base = ["rollout.num_steps=32", "run.max_iterations=3", "tracking.enabled=false"]
    hybrid = load_config("ppo_cartpole", [*base, "cluster.hybrid_engine=on"])
    separate = load_config("ppo_cartpole", [*base, "cluster.hybrid_engine=off"])
    assert load_config("ppo_cartpole", base).cluster.hybrid_engine == "auto"

    weights_h, facts_h = train(hybrid, 3, "get_state_dict", retry_rollout_at=1)
    weights_s, facts_s = train(separate, 3, "get_state_dict")

    assert_same_weights(weights_h, weights_s)
    assert facts_h["hybrid"] and not facts_s["hybrid"]
    assert (facts_h["groups"], facts_s["groups"]) == (2, 3)  # env + trainer; + rollout
    assert facts_h["sync_bytes"] == 0 < facts_s["sync_bytes"]  # in memory vs object store
    assert facts_h["versions"] == facts_s["versions"] == [2]


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def grpo(model: Path, *extra: str) -> RLPipeConfig:
    return tiny_grpo_config(model, *extra)


def test_language_model_hybrid_engine_with_reference_learns_the_same(tiny_lm: Path) -> None:
    kl = "algorithm.kl_coef=0.1"
    weights_h, facts_h = train(grpo(tiny_lm, kl, "cluster.hybrid_engine=on"), 2, "full_state")
    weights_s, facts_s = train(grpo(tiny_lm, kl, "cluster.hybrid_engine=off"), 2, "full_state")

    assert_same_weights(weights_h, weights_s)
    assert (facts_h["groups"], facts_s["groups"]) == (1, 3)  # trainer; + rollout, reference
    assert facts_h["sync_bytes"] == 0 < facts_s["sync_bytes"]


def test_two_fsdp_ranks_each_generate_with_their_own_engine(tiny_lm: Path) -> None:
    two = ("actor.num_workers=2", "rollout.num_workers=2")
    weights_h, facts_h = train(grpo(tiny_lm, *two, "cluster.hybrid_engine=on"), 2, "full_state")
    weights_s, facts_s = train(grpo(tiny_lm, *two, "cluster.hybrid_engine=off"), 2, "full_state")

    assert_same_weights(weights_h, weights_s)
    assert facts_h["versions"] == facts_s["versions"] == [1, 1]
