"""Shared pieces of the benchmarks: a bare worker-group loop and a real train-flow run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.cluster.runtime_env import apply_base_env  # noqa: E402

apply_base_env()

from mlflow.tracking import MlflowClient  # noqa: E402

from flows.cli import prefect_api  # noqa: E402
from flows.train import train  # noqa: E402
from infra.cluster import ray_cluster  # noqa: E402
from infra.driver.runtimes import run_iteration_in_process  # noqa: E402
from kinds.embodied.runtime import EmbodiedRuntime  # noqa: E402
from rl_core.config import load_config  # noqa: E402


def bare_loop(
    preset: str,
    overrides: list[str],
    iterations: int,
    after_iteration: Callable[[EmbodiedRuntime, int], bool] | None = None,
) -> list[float]:
    """Drive the same worker groups with a plain loop (no Prefect, no MLflow).

    Args:
        preset: Preset name.
        overrides: Dotted overrides.
        iterations: Maximum iterations.
        after_iteration: Called after each iteration; returning True stops the loop.

    Returns:
        Seconds per iteration (including ``after_iteration``).
    """
    cfg = load_config(preset, [*overrides, "tracking.enabled=false"])
    runtime = EmbodiedRuntime(cfg)
    times = []
    try:
        for it in range(iterations):
            start = time.perf_counter()
            run_iteration_in_process(runtime, it)
            stop = after_iteration(runtime, it) if after_iteration else False
            times.append(time.perf_counter() - start)
            if stop:
                break
    finally:
        runtime.shutdown()
        ray_cluster.shutdown()
    return times


def flow_run_metrics(preset: str, overrides: list[str], out: Path, keys: tuple[str, ...]) -> dict:
    """Run the train flow and return its summary plus per-iteration series of ``keys``.

    ``started`` is the wall-clock time (``time.time()``) at which the run was started,
    before the Prefect API, comparable with MLflow metric timestamps (milliseconds).
    """
    started = time.time()
    with prefect_api(out):
        summary = train(preset=preset, overrides=overrides)
    client = MlflowClient(summary["tracking_uri"])
    series = {}
    for key in keys:
        history = sorted(
            client.get_metric_history(summary["mlflow_run_id"], key), key=lambda m: m.step
        )
        series[key] = [m.value for m in history]
    return {"summary": summary, "series": series, "started": started}
