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
import tempfile
from pathlib import Path

from _runs import bare_loop, flow_run_metrics

WARMUP = 2
KEYS = (
    "time/iteration",
    "time/compute",
    "time/orchestration",
    "time/orch_flow_start",
    "time/orch_tasks",
    "time/orch_flow_end_and_tracking",
)


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
        base = bare_loop(args.config, common, args.iterations)[WARMUP:]
        run = flow_run_metrics(args.config, common, Path(tmp), KEYS)
        flow = {k: v[WARMUP:] for k, v in run["series"].items()}
    med, mean = statistics.median, statistics.mean
    base_it, flow_it = med(base), med(flow["time/iteration"])
    orch = med(flow["time/orchestration"])
    print(
        f"\n{args.config}: {args.iterations} iterations after {WARMUP} warm-up iterations, "
        "ms per iteration"
    )
    print(f"  {'':34}{'median':>8}{'mean':>9}")

    def row(label: str, values: list[float]) -> None:
        print(f"  {label:<34}{1000 * med(values):8.1f}{1000 * mean(values):9.1f}")

    row("bare loop (no Prefect/MLflow)", base)
    row("rlpipe iteration flow", flow["time/iteration"])
    row("  worker compute", flow["time/compute"])
    row("  orchestration", flow["time/orchestration"])
    row("    child flow start (API)", flow["time/orch_flow_start"])
    row("    tasks (engine, between steps)", flow["time/orch_tasks"])
    row("    child flow end + MLflow log", flow["time/orch_flow_end_and_tracking"])
    print(
        f"  orchestration: {100 * orch / flow_it:.1f}% of the iteration (medians; "
        "target <= 3% and <= 150 ms); a mean well above the median means pauses"
    )
    print(f"  ratio rlpipe / bare loop (medians) {flow_it / base_it:7.2f}x")


if __name__ == "__main__":
    main()
