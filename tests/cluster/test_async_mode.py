"""Async mode (``run.mode: async``) of embodied PPO: batches collected ahead of the trainer
are pinned to a weight version at most ``max_staleness`` behind, ``max_staleness: 0``
learns exactly what sync mode learns, a retried rollout is applied once, and a checkpoint
carries the batches collected ahead so a resumed run continues exactly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.cluster import ray_cluster
from infra.driver.runtimes import make_runtime
from rl_core.config import RLPipeConfig, load_config
from tests.in_process import assert_same_weights, checkpoint_and_resume, run_iterations

pytestmark = pytest.mark.integration
BASE = [
    "rollout.num_steps=16",
    "env.num_envs=4",
    "actor.num_minibatches=2",
    "actor.update_epochs=2",
    "tracking.enabled=false",
    "cluster.hybrid_engine=off",
]


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray_cluster.connect(num_cpus=2)
    yield
    ray_cluster.shutdown()


def config(*extra: str) -> RLPipeConfig:
    return load_config("ppo_cartpole", [*BASE, *extra])


def train(cfg: RLPipeConfig, iterations: int, retry_rollout_at: int = -1, runtime=None, start=0):
    """``iterations`` in process; the trainer's weights and each iteration's metrics.

    At ``retry_rollout_at`` a rollout is run, undone (as before a retry) and run again.
    """
    runtime = runtime or make_runtime(cfg)
    results = run_iterations(runtime, range(start, start + iterations), retry_rollout_at)
    metrics = [steps["rollout"].metrics for steps in results]
    return runtime.actor.get_state_dict()[0], metrics, runtime


def test_staleness_zero_learns_exactly_what_sync_mode_learns() -> None:
    sync, _, rt = train(config(), 3)
    rt.shutdown()
    zero, metrics, rt = train(config("run.mode=async", "algorithm.max_staleness=0"), 3)
    rt.shutdown()
    assert_same_weights(sync, zero)
    assert [m["async/staleness_max"] for m in metrics] == [0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def straight_run() -> tuple[dict, list[dict]]:
    """Five iterations with batches up to 2 versions ahead: weights and metrics."""
    weights, metrics, rt = train(config("run.mode=async", "algorithm.max_staleness=2"), 5)
    rt.shutdown()
    return weights, metrics


def test_batches_lag_at_most_max_staleness_and_a_retried_rollout_counts_once(
    straight_run,
) -> None:
    straight, metrics = straight_run
    lags = [m["async/staleness_max"] for m in metrics]
    assert lags == [0.0, 1.0, 2.0, 2.0, 2.0]  # batches 0-2 were launched with version 0
    assert all(m["async/buffer_fill"] == 1.0 for m in metrics)  # 2 batches ahead
    retried, _, rt = train(config("run.mode=async", "algorithm.max_staleness=2"), 5, 3)
    rt.shutdown()
    assert_same_weights(straight, retried)
    assert any(m["async/rollout_idle_seconds"] >= 0.0 for m in metrics)
    assert all(m["async/trainer_idle_seconds"] >= 0.0 for m in metrics)


def test_a_checkpoint_keeps_the_batches_collected_ahead(tmp_path, straight_run) -> None:
    cfg = config("run.mode=async", "algorithm.max_staleness=2")
    first, _, rt = train(cfg, 2)
    resumed = checkpoint_and_resume(rt, cfg, tmp_path, 2)
    # launched before the save, with versions 0 and 1
    assert [(c.index, c.version) for c in resumed.collection.pipeline.chunks] == [(2, 0), (3, 1)]
    weights, metrics, rt = train(cfg, 3, runtime=resumed, start=2)
    rt.shutdown()
    assert_same_weights(straight_run[0], weights)
    assert [m["async/staleness_max"] for m in metrics] == [2.0, 2.0, 2.0]


def test_async_mode_is_refused_where_it_cannot_run() -> None:
    from rl_core.config import ConfigError

    with pytest.raises(ConfigError, match="cluster.hybrid_engine = 'on' is not possible"):
        load_config("ppo_cartpole", ["run.mode=async", "cluster.hybrid_engine=on"])
    assert load_config("ppo_cartpole", ["run.mode=async"]).run.mode == "async"
