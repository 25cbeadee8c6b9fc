"""Orchestration overhead of the iteration-as-a-flow design, against a bare loop.

Runs the same preset twice on this machine, side by side:
  * baseline: the worker groups driven by a plain Python loop (no Prefect, no MLflow);
  * rlpipe:   ``python flows/train.py`` semantics: train flow, one child flow per
              iteration, thin tasks in the flow thread, MLflow logging.
and prints per-iteration compute, orchestration, their ratio, and where orchestration goes.

Usage: python benchmarks/overhead.py [--iterations 20] [--config ppo_cartpole] [overrides...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.runtime_env import apply_base_env  # noqa: E402

apply_base_env()

from mlflow.tracking import MlflowClient  # noqa: E402

from flows.cli import prefect_api  # noqa: E402
from flows.train import train  # noqa: E402
from infra import ray_cluster  # noqa: E402
from infra.runtime import TrainingRuntime  # noqa: E402
from rl_core.config import load_config  # noqa: E402

WARMUP = 2


def baseline(preset: str, overrides: list[str], iterations: int) -> list[float]:
    """Seconds per iteration of the bare loop over the same worker groups."""
    cfg = load_config(preset, overrides)
    runtime = TrainingRuntime(cfg)
    times = []
    for it in range(iterations):
        start = time.perf_counter()
        runtime.weight_sync()
        runtime.collect()
        runtime.reward()
        runtime.advantages()
        runtime.update(it)
        times.append(time.perf_counter() - start)
    runtime.shutdown()
    ray_cluster.shutdown()
    return times[WARMUP:]


def rlpipe(preset: str, overrides: list[str], out: Path) -> dict[str, list[float]]:
    """Per-iteration ``time/*`` metrics of a real train flow run."""
    with prefect_api(out):
        summary = train(preset=preset, overrides=overrides)
    client = MlflowClient(summary["tracking_uri"])
    keys = (
        "time/iteration",
        "time/compute",
        "time/orchestration",
        "time/orch_flow_start",
        "time/orch_tasks",
        "time/orch_flow_end_and_tracking",
    )
    series = {}
    for key in keys:
        history = sorted(
            client.get_metric_history(summary["mlflow_run_id"], key), key=lambda m: m.step
        )
        series[key] = [m.value for m in history][WARMUP:]
    return series


def main() -> None:
    """Run both and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--config", default="ppo_cartpole")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlpipe-bench-") as tmp:
        common = [
            *args.overrides,
            f"run.max_iterations={args.iterations}",
            "run.eval_interval=0",
            "run.checkpoint_interval=0",
            "run.stop_at_eval_return=null",
            f"run.output_dir={tmp}",
            "run.name=overhead-bench",
        ]
        base = baseline(args.config, [*common, "tracking.enabled=false"], args.iterations)
        flow = rlpipe(args.config, common, Path(tmp))
    med = statistics.median
    base_it, flow_it = med(base), med(flow["time/iteration"])
    orch = med(flow["time/orchestration"])
    print(
        f"\n{args.config}: {args.iterations} iterations, medians after {WARMUP} warm-up iterations"
    )
    print(f"  bare loop (no Prefect/MLflow)     {1000 * base_it:8.1f} ms / iteration")
    print(f"  rlpipe iteration flow             {1000 * flow_it:8.1f} ms / iteration")
    print(f"    worker compute                  {1000 * med(flow['time/compute']):8.1f} ms")
    print(
        f"    orchestration                   {1000 * orch:8.1f} ms "
        f"({100 * orch / flow_it:.1f}% of the iteration; target <= 3% and <= 150 ms)"
    )
    print(f"      child flow start (API)        {1000 * med(flow['time/orch_flow_start']):8.1f} ms")
    print(f"      tasks (engine, between steps) {1000 * med(flow['time/orch_tasks']):8.1f} ms")
    print(
        f"      child flow end + MLflow log   {1000 * med(flow['time/orch_flow_end_and_tracking']):8.1f} ms"
    )
    print(f"  ratio rlpipe / bare loop          {flow_it / base_it:8.2f}x")


if __name__ == "__main__":
    main()
