"""Sync vs async GRPO on ``grpo_arith``: time to 80 % held-out accuracy from the same SFT model.

For each seed, one after the other, the real train flow runs the ``grpo_arith`` preset
(``run.seed``: the seed) from the same SFT checkpoint (the preset's warm start trained with
``--sft-seed``, cached as in ``grpo_arith_vs_trl.py``) in three ways:

- ``sync``: the preset as a user runs it (hybrid engine: the rollout engine lives in the
  trainer's process);
- ``sync-split``: sync mode with a rollout worker of its own (``cluster.hybrid_engine=off``),
  the placement async mode needs, to separate the cost of the placement from the overlap;
- ``async``: ``run.mode=async algorithm.max_staleness=--staleness`` (the rollout worker
  generates the next batch while the trainer scores, computes advantages and updates).

Each is stopped by ``run.stop_at_eval_return`` at the first evaluation reaching the target.
Training time to the target is the sum of ``time/iteration`` minus ``time/evaluate`` up to
that evaluation; wall time runs from the start of the run to the moment it was logged.
Prints a table per seed, the medians, and the ratio async / sync (target ≤ 0.7×).

Usage: python benchmarks/async_grpo.py [--seeds 0,1,2] [--sft-seed 0] [--staleness 1]
       [--target 0.8] [--max-iterations 120] [--modes sync,sync-split,async] [overrides...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from grpo_arith_vs_trl import from_sft, rlpipe_time_to, sft_checkpoint  # noqa: I001 - sets up the path

TARGET_RATIO = 0.7


def modes(staleness: int) -> dict[str, list[str]]:
    """Overrides of each compared way to run the preset."""
    return {
        "sync": [],
        "sync-split": ["cluster.hybrid_engine=off"],
        "async": ["run.mode=async", f"algorithm.max_staleness={staleness}"],
    }


def median_or_none(values: list[float | None]) -> float | None:
    """Median of the values that are not None (None when there are none)."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def fmt(value: float | None, unit: str = " s") -> str:
    """A number with its unit, or a dash."""
    return "-" if value is None else f"{value:.1f}{unit}"


def main() -> None:
    """Run every mode per seed and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sft-seed", type=int, default=0)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.8)
    parser.add_argument("--max-iterations", type=int, default=120)
    parser.add_argument("--modes", default="sync,sync-split,async")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    chosen = {m: o for m, o in modes(args.staleness).items() if m in args.modes.split(",")}
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in chosen}
    print(f"{'seed':>4} {'mode':>10} {'updates':>7} {'training':>10} {'wall':>9} {'accuracy':>8}")
    model_dir = sft_checkpoint(args.sft_seed)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for mode, extra in chosen.items():
            with tempfile.TemporaryDirectory(prefix="rlpipe-async-grpo-") as tmp:
                overrides = [
                    *from_sft(seed, args.max_iterations, args.target, tmp, model_dir),
                    *extra,
                    *args.overrides,
                ]
                r = rlpipe_time_to(overrides, Path(tmp) / "out", args.target)
            results[mode].append(r)
            reached = r["updates"] is not None
            print(
                f"{seed:>4} {mode:>10} {r['updates'] if reached else 'missed':>7} "
                f"{fmt(r.get('train')):>10} {fmt(r.get('wall')):>9} "
                f"{(r.get('at') or r['best'] or 0):>8.1%}",
                flush=True,
            )
    print(f"medians (time to {args.target:.0%} held-out accuracy, seeds {args.seeds}):")
    train = {m: median_or_none([r.get("train") for r in rs]) for m, rs in results.items()}
    wall = {m: median_or_none([r.get("wall") for r in rs]) for m, rs in results.items()}
    for mode, rs in results.items():
        spread = [r["train"] for r in rs if r.get("train") is not None]
        extent = f" [{min(spread):.1f}-{max(spread):.1f}]" if spread else ""
        print(
            f"  {mode:>10}: training {fmt(train[mode])}{extent}, wall {fmt(wall[mode])}, "
            f"reached {len(spread)}/{len(rs)}"
        )
    for base in ("sync", "sync-split"):
        if train.get("async") and train.get(base):
            print(
                f"ratio async / {base}: training {train['async'] / train[base]:.2f}x, wall "
                f"{wall['async'] / wall[base]:.2f}x (target <= {TARGET_RATIO}x)"
            )


if __name__ == "__main__":
    main()
