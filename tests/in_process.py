"""Iterations driven in the test process (no Prefect), with an undone rollout on request,
checkpoints resumed in a new runtime, and the comparison of the weights they train."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from infra.checkpoint.store import step_dir_name
from infra.driver.runtimes import make_runtime, run_iteration_in_process


def run_iterations(
    runtime: Any, iterations: range, retry_rollout_at: int = -1
) -> list[dict[str, Any]]:
    """Run ``iterations``; each iteration's step results, in order.

    At ``retry_rollout_at`` a rollout is first run and undone, as before a retry.
    """
    results = []
    for it in iterations:
        if it == retry_rollout_at:
            runtime.weight_sync(it)
            runtime.snapshot("rollout")
            runtime.rollout(it)
            runtime.restore("rollout")
        results.append(run_iteration_in_process(runtime, it))
    return results


def train_in_process(
    cfg: Any, iterations: range, runtime: Any = None
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], Any]:
    """Run ``iterations`` of a run on a runtime (a new one of ``cfg`` unless given).

    Returns:
        The trainer's weights, each iteration's step results, and the runtime (for the
        caller to shut down).
    """
    runtime = runtime or make_runtime(cfg)
    results = run_iterations(runtime, iterations)
    return runtime.actor.get_state_dict()[0], results, runtime


def checkpoint_and_resume(runtime: Any, cfg: Any, checkpoint_dir: Path, step: int) -> Any:
    """Checkpoint ``runtime`` after ``step`` iterations, shut it down, resume in a new one.

    Returns:
        A new runtime of ``cfg`` with the checkpoint loaded, to run iteration ``step`` next.
    """
    runtime.save_checkpoint(str(checkpoint_dir), step)
    runtime.shutdown()
    resumed = make_runtime(cfg)
    resumed.load_checkpoint(str(checkpoint_dir), step_dir_name(step), step)
    return resumed


def straight_then_resumed(
    cfg: Any,
    checkpoint_dir: Path,
    step: int,
    total: int,
    on_start: Callable[[Any], None] | None = None,
) -> tuple[
    dict[str, np.ndarray], list[dict[str, Any]], dict[str, np.ndarray], list[dict[str, Any]]
]:
    """Train ``total`` iterations straight through, checkpointing after ``step`` of them;
    then resume that checkpoint in a new runtime and train the rest.

    Two runtimes instead of three: the checkpoint is written mid-run, so the straight run
    also shows that writing one changes nothing.

    Args:
        cfg: The run's config.
        checkpoint_dir: Where the checkpoint goes.
        step: Iterations before the checkpoint.
        total: Iterations of the run.
        on_start: Called with the straight run's runtime before it trains (to inspect it).

    Returns:
        The straight run's final weights and step results, and the resumed run's.
    """
    runtime = make_runtime(cfg)
    if on_start is not None:
        on_start(runtime)
    results = run_iterations(runtime, range(step))
    runtime.save_checkpoint(str(checkpoint_dir), step)
    results += run_iterations(runtime, range(step, total))
    straight = runtime.actor.get_state_dict()[0]
    runtime.shutdown()
    resumed = make_runtime(cfg)
    resumed.load_checkpoint(str(checkpoint_dir), step_dir_name(step), step)
    weights, resumed_results, resumed = train_in_process(cfg, range(step, total), resumed)
    resumed.shutdown()
    return straight, results, weights, resumed_results


def assert_same_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Assert that two state dicts hold the same tensors, bit for bit."""
    assert a.keys() == b.keys()
    for name, value in a.items():
        np.testing.assert_array_equal(b[name], value, err_msg=name)
