"""rlpipe's train flow against a bare loop over the same workers, first iteration → solved.

Both start from the same seed with the preset and evaluate the same way (the preset's
episodes every ``run.eval_interval`` iterations, stop at ``run.stop_at_eval_return``).
This isolates orchestration: start-up is not counted (``cartpole_solve.py --bare-loop``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import ray
from _runs import bare_loop, flow_run_metrics  # noqa: I001 - sets up the path and env first

from kinds.embodied.episodes import run_episodes
from rl_core.config import load_config
from rl_core.seeding import eval_seeds


def compare(preset: str, overrides: list[str]) -> None:
    """Run both (bare loop first) and print the comparison.

    Args:
        preset: Preset name or YAML path.
        overrides: Dotted overrides (``run.seed=...`` among them).
    """
    cfg = load_config(preset, overrides)
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
        common = [*overrides, f"run.output_dir={tmp}", "run.name=solve-bench"]
        started = time.perf_counter()
        base = bare_loop(preset, common, cfg.run.max_iterations, evaluate)
        base_total = time.perf_counter() - started
        run = flow_run_metrics(preset, common, Path(tmp), ("time/iteration",))
    flow_iters = run["series"]["time/iteration"]
    summary = run["summary"]
    print(f"\n{preset} (seed {cfg.run.seed}): first iteration -> evaluation >= {target}")
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
