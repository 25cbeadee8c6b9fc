"""Worker scale: per-iteration orchestration with 1, 4, 16 and 32 env workers, same total work.

Each point runs ``ppo_cartpole`` through the train flow with W env workers holding
``32 / W`` envs each (32 envs x 32 steps = 1,024 env steps per iteration at every W) and
``max(1, W / 4)`` rollout workers, on a local Ray cluster with enough logical CPUs for
every worker (``cluster.num_cpus``). Every iteration fans out to all of them (rollout
requests, weight-sync broadcast, heartbeats and deadlines included), so orchestration
that grows with the worker count shows here. On a 2-core machine the workers share the
cores; worker compute (``time/compute``) therefore grows with W, and the figure that
matters is orchestration (the iteration's wall time minus worker compute).

Prints, per W: median iteration time, compute and orchestration after 3 warm-up
iterations, and orchestration relative to W = 1 (goal: at most 1.2 at W = 32).

Usage: python benchmarks/worker_scale.py [--workers 1,4,16,32] [--iterations 15] [overrides...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from _runs import flow_run_metrics

WARMUP = 3
TOTAL_ENVS = 32
KEYS = ("time/iteration", "time/compute", "time/orchestration")


def run_point(workers: int, iterations: int, overrides: list[str]) -> dict[str, float]:
    """Median timings of one worker count."""
    rollout_workers = max(1, workers // 4)
    with tempfile.TemporaryDirectory(prefix="rlpipe-scale-") as tmp:
        common = [
            f"env.num_workers={workers}",
            f"env.num_envs={TOTAL_ENVS // workers}",
            "rollout.num_steps=32",
            f"rollout.num_workers={rollout_workers}",
            f"cluster.num_cpus={workers + rollout_workers + 4}",
            "run.eval_interval=0",
            "run.checkpoint_interval=0",
            "run.stop_at_eval_return=null",
            "tracking.system_metrics=false",
            "tracking.learning_curve=false",
            *overrides,
            f"run.max_iterations={iterations}",
            f"run.output_dir={tmp}",
            f"run.name=scale-{workers}",
        ]
        run = flow_run_metrics("ppo_cartpole", common, Path(tmp), KEYS)
    med = statistics.median
    return {key: med(values[WARMUP:]) for key, values in run["series"].items()}


def main() -> None:
    """Run every worker count and print the curve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4,16,32")
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    for w in counts:
        if TOTAL_ENVS % w:
            parser.error(f"--workers: {w} does not divide the {TOTAL_ENVS} envs")
    points = {w: run_point(w, args.iterations, args.overrides) for w in counts}
    base = points[counts[0]]["time/orchestration"]
    print(
        f"\nppo_cartpole, {TOTAL_ENVS} envs x 32 steps per iteration, "
        f"medians of iterations {WARMUP + 1}-{args.iterations}"
    )
    print("  env workers  rollout workers  iteration ms  compute ms  orchestration ms  vs first")
    for w, p in points.items():
        print(
            f"  {w:>11}  {max(1, w // 4):>15}  {1000 * p['time/iteration']:>12.0f}  "
            f"{1000 * p['time/compute']:>10.0f}  {1000 * p['time/orchestration']:>16.0f}  "
            f"{p['time/orchestration'] / base:>8.2f}x"
        )


if __name__ == "__main__":
    main()
