"""LoRA on the reasoning trainer, on a real local Ray cluster: only the adapters train and
travel to the rollout engines, the parity probe after each sync sees them applied (and
fails the sync when an engine drops them), and the hybrid engine learns the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from safetensors.torch import load_file

from infra.driver.runtimes import make_runtime
from rl_core.llm.sync_probe import SyncProbeError
from rl_core.models.tiny_lm import create_tiny_lm
from tests.in_process import run_iterations
from tests.tiny_grpo import tiny_grpo_config

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_local")]

#: LoRA, and a reward random completions of the tiny model earn sometimes (a digit), so
#: advantages are not all zero and the adapters move
LORA = (
    "actor.lora.rank=4",
    "actor.lora.alpha=8",
    "reward.reward_type=format",
    "reward.format_pattern=\\d",
)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=2)


def train(model: Path, iterations: int, *extra: str) -> tuple[dict[str, np.ndarray], list, Any]:
    """The trainer's state after ``iterations`` and a weight sync, each iteration's steps
    (that sync's last), and a rollout worker's engine weights (None: the hybrid engine)."""
    runtime = make_runtime(tiny_grpo_config(model, *extra))
    try:
        steps = run_iterations(runtime, range(iterations))
        steps.append({"weight_sync": runtime.weight_sync(iterations)})  # the last update's
        state = runtime.actor.full_state()[0]
        engine = None if runtime.hybrid else ray.get(runtime.rollout_group[0].weights.remote())
        return state, steps, engine
    finally:
        runtime.shutdown()


def test_only_the_adapters_train_and_travel(tiny_lm: Path) -> None:
    base = {
        f"base_model.model.{k}": v.numpy()
        for k, v in load_file(str(tiny_lm / "model.safetensors")).items()
    }
    state, steps, engine = train(tiny_lm, 3, *LORA, "cluster.hybrid_engine=off")
    assert state and all(".lora_" in name for name in state), sorted(state)[:5]
    lora_b = [v for k, v in state.items() if ".lora_B." in k]
    assert max(float(np.abs(v).max()) for v in lora_b) > 0, "the adapters did not train"
    sync = steps[-1]["weight_sync"].metrics
    full_bytes = sum(v.nbytes for v in base.values())
    assert 0 < sync["rollout/weight_sync_bytes"] < full_bytes / 5  # the adapters alone
    assert sync["rollout/sync_probe_max_diff"] < 1e-5
    for name, value in state.items():  # the engine holds the synced adapters...
        np.testing.assert_array_equal(engine[name[len("model.") :]], value, err_msg=name)
    for name, value in engine.items():  # ...on the untouched base weights
        plain = name.replace(".base_layer.", ".")
        if ".lora_" not in name and plain in base:
            np.testing.assert_array_equal(value, base[plain], err_msg=name)


def test_the_probe_fails_a_sync_whose_adapters_the_engine_ignores(tiny_lm: Path) -> None:
    runtime = make_runtime(tiny_grpo_config(tiny_lm, *LORA, "cluster.hybrid_engine=off"))
    try:
        run_iterations(runtime, range(2))

        def drop_weight_updates(worker: Any) -> None:  # runs inside the rollout worker
            def keep_old_weights(named_tensors: Any, version: int) -> None:
                worker.engine.version = version

            worker.engine.update_weights = keep_old_weights

        ray.get([h.__ray_call__.remote(drop_weight_updates) for h in runtime.rollout_group.handles])
        with pytest.raises(SyncProbeError, match="LoRA adapter was not applied"):
            runtime.weight_sync(2)
    finally:
        runtime.shutdown()


def test_the_hybrid_engine_learns_what_separate_workers_learn(tiny_lm: Path) -> None:
    hybrid, steps_h, _ = train(tiny_lm, 2, *LORA, "cluster.hybrid_engine=on")
    separate, _, _ = train(tiny_lm, 2, *LORA, "cluster.hybrid_engine=off")
    assert hybrid.keys() == separate.keys()
    for name, value in hybrid.items():
        np.testing.assert_array_equal(separate[name], value, err_msg=name)
    assert steps_h[-1]["weight_sync"].metrics["rollout/sync_probe_max_diff"] < 1e-5
