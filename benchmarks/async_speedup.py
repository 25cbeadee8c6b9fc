"""Sync vs async PPO on CartPole with a simulated env latency: env steps/s and time to solve.

Each env step waits ``--latency-ms`` (``env.step_latency_ms``, like a remote simulator or
robot), so collection time is mostly waiting, which async mode (``run.mode: async``,
``algorithm.max_staleness: --staleness``) overlaps with the update. For each seed, one
after the other, the train CLI runs the default preset in sync mode (as a user runs it)
and in async mode, each timed from just before the process starts to the evaluation that
reaches the preset's target (``_solve_runs.run_rlpipe``). Env steps/s is measured from the
first iteration's metrics to the solving evaluation (start-up excluded). Prints a table per
seed, the medians and the ratios async / sync (targets: env steps/s ≥ 1.7×, time to solve
≤ 0.65×), and the env steps each needed to solve (the same within seed noise when the
staleness costs no sample efficiency).

Usage: python benchmarks/async_speedup.py [--seeds 0,1,2] [--latency-ms 2] [--staleness 1]
       [--timeout 900] [overrides...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _solve_protocol import median_solved_s  # noqa: E402
from _solve_runs import run_rlpipe  # noqa: E402

from rl_core.config import load_config  # noqa: E402

PRESET = "ppo_cartpole"
TARGET_STEPS_RATIO = 1.7
TARGET_TIME_RATIO = 0.65


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--latency-ms", type=float, default=2.0)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    common = [f"env.step_latency_ms={args.latency_ms}", *args.overrides]
    modes = {
        "sync": common,
        "async": [*common, "run.mode=async", f"algorithm.max_staleness={args.staleness}"],
    }
    target = load_config(PRESET, common).run.stop_at_eval_return
    results: dict[str, list] = {m: [] for m in modes}
    print(f"{'seed':>4} {'mode':>6} {'solved s':>9} {'env steps':>10} {'steps/s':>8}")
    for seed in seeds:
        for mode, overrides in modes.items():
            r = run_rlpipe(seed, PRESET, overrides, target, args.timeout)
            results[mode].append(r)
            solved = f"{r.solved_s:9.1f}" if r.solved else f"{'unsolved':>9}"
            rate = r.notes.get("env_steps_per_s", 0.0)
            print(f"{seed:>4} {mode:>6} {solved} {r.env_steps or 0:>10} {rate:>8.0f}", flush=True)
    rates = {
        m: statistics.median(r.notes["env_steps_per_s"] for r in rs) for m, rs in results.items()
    }
    solve = {m: median_solved_s(rs) for m, rs in results.items()}
    print(f"env.step_latency_ms={args.latency_ms}, max_staleness={args.staleness}, medians:")
    for mode in modes:
        steps = [r.env_steps for r in results[mode] if r.solved]
        spread = f"{min(steps)}-{max(steps)}" if steps else "-"
        print(
            f"  {mode:>5}: {rates[mode]:.0f} env steps/s, solved in {solve[mode]:.1f} s, "
            f"env steps to solve {spread}"
        )
    steps_ratio = rates["async"] / rates["sync"]
    time_ratio = solve["async"] / solve["sync"]
    print(
        f"ratio async / sync: env steps/s {steps_ratio:.2f}x (target >= {TARGET_STEPS_RATIO}x), "
        f"time to solve {time_ratio:.2f}x (target <= {TARGET_TIME_RATIO}x)"
    )


if __name__ == "__main__":
    main()
