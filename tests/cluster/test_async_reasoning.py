"""Async mode (``run.mode: async``) of a reasoning run on the tiny LM: batches generated
ahead of the trainer are pinned to a weight version at most ``max_staleness`` behind,
``max_staleness: 0`` learns exactly what sync mode learns, a retried rollout is applied once
(also when a launched generation failed), and a checkpoint carries the batches generated
ahead so a resumed run continues exactly."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from infra.driver.runtimes import make_runtime
from rl_core.config import ConfigError, RLPipeConfig, load_config
from tests.in_process import assert_same_weights, checkpoint_and_resume, run_iterations

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_local")]


@pytest.fixture(scope="module")
def tiny_dir(tiny_lm_one_layer: str) -> str:
    return tiny_lm_one_layer


def config(tiny_dir: str, *extra: str) -> RLPipeConfig:
    return load_config(
        overrides=[
            "model.model_type=hf_causal_lm",
            f"model.model_path={tiny_dir}",
            "data.prompts_per_batch=4",
            "data.eval_size=4",
            "rollout.max_new_tokens=4",
            "algorithm.adv_type=grpo",
            "algorithm.group_size=4",
            "algorithm.normalize_advantages=false",
            "reward.reward_type=format",
            "reward.format_pattern='[0-9]'",
            "reward.num_tasks=1",
            "actor.num_minibatches=1",
            "actor.update_epochs=1",
            "actor.micro_batch_size=16",
            "actor.lr=1e-2",
            "tracking.enabled=false",
            "cluster.hybrid_engine=off",
            *extra,
        ]
    )


def train(cfg: RLPipeConfig, iterations: int, retry_rollout_at: int = -1, runtime=None, start=0):
    """``iterations`` in process: the trainer's weights, rollout metrics, the runtime."""
    runtime = runtime or make_runtime(cfg)
    results = run_iterations(runtime, range(start, start + iterations), retry_rollout_at)
    metrics = [steps["rollout"].metrics for steps in results]
    return runtime.actor.full_state()[0], metrics, runtime


def fail_and_undo_rollout(runtime, iteration: int) -> None:
    """Sync, then a rollout step that fails (a fault is armed), undone as before a retry."""
    runtime.weight_sync(iteration)
    runtime.snapshot("rollout")
    with pytest.raises(Exception, match="injected fault"):
        runtime.rollout(iteration)
    runtime.restore("rollout")


def test_staleness_zero_learns_exactly_what_sync_mode_learns(tiny_dir: str) -> None:
    runtime = make_runtime(config(tiny_dir))
    initial = runtime.actor.full_state()[0]
    sync, _, rt = train(config(tiny_dir), 3, runtime=runtime)
    rt.shutdown()
    assert any(not np.array_equal(initial[k], sync[k]) for k in sync), "no update moved"
    zero, metrics, rt = train(config(tiny_dir, "run.mode=async", "algorithm.max_staleness=0"), 3)
    rt.shutdown()
    assert_same_weights(sync, zero)
    assert [m["async/staleness_max"] for m in metrics] == [0.0, 0.0, 0.0]


def test_batches_lag_at_most_max_staleness_and_retried_rollouts_count_once(
    tiny_dir: str,
) -> None:
    cfg = config(tiny_dir, "run.mode=async", "algorithm.max_staleness=2")
    straight, metrics, rt = train(cfg, 5)
    rt.shutdown()
    assert [m["async/staleness_max"] for m in metrics] == [0.0, 1.0, 2.0, 2.0, 2.0]
    assert all(m["async/buffer_fill"] == 1.0 for m in metrics)  # 2 batches ahead
    assert all(m["async/trainer_idle_seconds"] >= 0.0 for m in metrics)
    retried, _, rt = train(cfg, 5, retry_rollout_at=3)
    rt.shutdown()
    assert_same_weights(straight, retried)


@pytest.fixture(scope="module")
def straight_staleness_one(tiny_dir: str) -> dict:
    """The trainer's weights after 4 iterations with ``max_staleness: 1``, no faults."""
    weights, _, rt = train(config(tiny_dir, "run.mode=async", "algorithm.max_staleness=1"), 4)
    rt.shutdown()
    return weights


def test_a_failed_generation_is_launched_again_with_its_weight_version(
    tiny_dir: str, straight_staleness_one: dict
) -> None:
    """Batch 2 (launched at iteration 1 with version 1) fails; iteration 2's rollout fails on
    it, is undone and retried: the batch is generated again with version 1 although the
    rollout workers hold version 2 by then."""
    cfg = config(tiny_dir, "run.mode=async", "algorithm.max_staleness=1")
    runtime = make_runtime(cfg)
    train(cfg, 1, runtime=runtime)
    ray.get(runtime.rollout_group[0].arm_fault.remote("raise", "generate"))  # batch 2
    train(cfg, 1, runtime=runtime, start=1)
    fail_and_undo_rollout(runtime, 2)
    weights, metrics, rt = train(cfg, 2, runtime=runtime, start=2)
    rt.shutdown()
    assert_same_weights(straight_staleness_one, weights)
    assert [m["async/staleness_max"] for m in metrics] == [1.0, 1.0]


def test_a_checkpoint_keeps_the_batches_generated_ahead(
    tiny_dir: str, straight_staleness_one: dict, tmp_path
) -> None:
    cfg = config(tiny_dir, "run.mode=async", "algorithm.max_staleness=1")
    _, _, rt = train(cfg, 2)
    resumed = checkpoint_and_resume(rt, cfg, tmp_path, 2)
    assert (tmp_path / "step_000002" / "rollout_pipeline.pt").is_file()
    assert [c.index for c in resumed.generation.pipeline.chunks] == [2]
    weights, metrics, rt = train(cfg, 2, runtime=resumed, start=2)
    rt.shutdown()
    assert_same_weights(straight_staleness_one, weights)
    assert [m["async/staleness_max"] for m in metrics] == [1.0, 1.0]


def test_partial_rollouts_continue_under_new_weights_and_resume_exactly(
    tiny_dir: str, tmp_path
) -> None:
    """With 1 token per version and max_staleness 2, batch k's first token is generated
    with v_{k-2}, its second with v_{k-1}, the rest with v_k. A resumed run whose
    continuation of a checkpointed batch fails learns exactly what a straight run learns."""
    cfg = config(
        tiny_dir,
        "run.mode=async",
        "algorithm.max_staleness=2",
        "rollout.partial_rollout_tokens=1",
    )
    straight, metrics, rt = train(cfg, 5)
    rt.shutdown()
    assert [m["async/staleness_max"] for m in metrics] == [0.0, 1.0, 2.0, 2.0, 2.0]
    # later tokens are fresher than the first: the mean lag is below the largest
    assert all(0.0 < m["async/staleness_mean"] < m["async/staleness_max"] for m in metrics[1:])
    _, _, rt = train(cfg, 2)
    resumed = checkpoint_and_resume(rt, cfg, tmp_path, 2)
    assert [c.index for c in resumed.generation.pipeline.chunks] == [2, 3]
    # iteration 2 continues batch 2 (restored) first: that continuation fails
    ray.get(resumed.rollout_group[0].arm_fault.remote("raise", "continue_generation"))
    fail_and_undo_rollout(resumed, 2)
    weights, _, rt = train(cfg, 3, runtime=resumed, start=2)
    rt.shutdown()
    assert_same_weights(straight, weights)


def test_async_reasoning_is_refused_where_it_cannot_run(tiny_dir: str) -> None:
    with pytest.raises(ConfigError, match="algorithm.dynamic_sampling = true"):
        config(tiny_dir, "run.mode=async", "algorithm.dynamic_sampling=true")
    with pytest.raises(ConfigError, match="rollout.partial_rollout_tokens = 2 continues"):
        config(tiny_dir, "rollout.partial_rollout_tokens=2")
    with pytest.raises(ConfigError, match="max_staleness >= 1"):
        config(
            tiny_dir,
            "run.mode=async",
            "algorithm.max_staleness=0",
            "rollout.partial_rollout_tokens=2",
        )
