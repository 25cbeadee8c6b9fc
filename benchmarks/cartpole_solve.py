"""Time to solve CartPole: rlpipe's train flow against a bare loop over the same workers.

Both start from the same seed with the default preset and evaluate the same way (10
deterministic episodes every ``run.eval_interval`` iterations, stop at 475). Prints the
time from the first iteration to the solved evaluation for each, and their ratio.

Usage: python benchmarks/cartpole_solve.py [--config ppo_cartpole] [overrides...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import ray
from _runs import bare_loop, flow_run_metrics

from infra.evaluation import run_episodes
from rl_core.config import load_config
from rl_core.seeding import eval_seeds


def main() -> None:
    """Run both and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="ppo_cartpole")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = load_config(args.config, args.overrides)
    target = cfg.run.stop_at_eval_return or 475.0
    config = cfg.model_dump(mode="json")
    seeds = eval_seeds(cfg.run.seed, cfg.eval.num_episodes)
    solved_at: list[int] = []

    def evaluate(runtime, it: int) -> bool:
        last = it + 1 >= cfg.run.max_iterations
        if not (last or (cfg.run.eval_interval and (it + 1) % cfg.run.eval_interval == 0)):
            return False
        weights = ray.get(runtime.policy_weights_ref())
        mean = float(np.mean(run_episodes(config, weights, seeds)["returns"]))
        if mean >= target:
            solved_at.append(it + 1)
            return True
        return False

    with tempfile.TemporaryDirectory(prefix="rlpipe-bench-") as tmp:
        common = [*args.overrides, f"run.output_dir={tmp}", "run.name=solve-bench"]
        started = time.perf_counter()
        base = bare_loop(args.config, common, cfg.run.max_iterations, evaluate)
        base_total = time.perf_counter() - started
        run = flow_run_metrics(args.config, common, Path(tmp), ("time/iteration",))
    flow_iters = run["series"]["time/iteration"]
    summary = run["summary"]
    print(f"\n{args.config} (seed {cfg.run.seed}): first iteration -> evaluation >= {target}")
    print(
        f"  bare loop + in-process evaluation  {sum(base):6.1f} s  "
        f"({len(base)} iterations, solved={bool(solved_at)}; {base_total:.1f} s with start-up)"
    )
    print(
        f"  rlpipe train flow                  {sum(flow_iters):6.1f} s  "
        f"({len(flow_iters)} iterations, solved={summary['solved']}, "
        f"eval {summary['last_eval_return']})"
    )
    print(f"  ratio rlpipe / bare loop           {sum(flow_iters) / sum(base):6.2f}x")


if __name__ == "__main__":
    main()
