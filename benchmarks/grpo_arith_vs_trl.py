"""Time to 80 % held-out accuracy: the ``grpo_arith`` preset in rlpipe against TRL's GRPOTrainer.

Both start from the same SFT checkpoint, the preset's warm start (``sft_arith`` run by the
SFT flow exactly as ``run.warm_start`` runs it, built once per seed and cached under
``outputs/bench-sft/seed<N>``), with the preset's hyperparameters (prompts per batch,
group size, learning rate, max new tokens, clipping, KL), and both score the same held-out
prompts with rlpipe's evaluation (greedy accuracy) every ``run.eval_interval`` updates,
before training too. Evaluation time is excluded from both training times.

- rlpipe: the real train flow, stopped by ``run.stop_at_eval_return`` at the first
  evaluation reaching the target. Training time to the target is the sum of
  ``time/iteration`` minus ``time/evaluate`` over the iterations up to that evaluation
  (minus the checkpoint written after it); wall time to the target runs from the start of
  the run (Prefect API, Ray, workers, the evaluation before training) to the moment that
  evaluation was logged.
- TRL: ``GRPOTrainer`` in a subprocess (one thread, ``_trl_anchor.py``); a callback
  evaluates the model being trained and stops the clock while it does.

Usage::

    python benchmarks/grpo_arith_vs_trl.py [--seed 0] [--max-iterations 120] [--target 0.8]

``--max-iterations`` caps both sides (rlpipe iterations, TRL optimizer steps; one each per
batch). The first run for a seed also trains the SFT checkpoint (about 2 minutes).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _runs import flow_run_metrics  # noqa: I001 - sets up the path and env first
from _trl_anchor import SETUP_HINT, run_trl, trl_available
from mlflow.tracking import MlflowClient

from flows.cli import prefect_api
from flows.sft import sft
from rl_core.config import load_config

PRESET = "grpo_arith"
ROOT = Path(__file__).resolve().parents[1]
TRAIN_RATIO_TARGET = 2.0  # rlpipe training time <= 2x TRL's
WALL_RATIO_TARGET = 3.0  # rlpipe wall time <= 3x TRL's training time


def sft_checkpoint(seed: int) -> Path:
    """The preset's warm-start model for ``seed``, trained by the SFT flow when not cached."""
    warm_start = load_config(PRESET).run.warm_start
    cache = ROOT / "outputs" / "bench-sft" / f"seed{seed}"
    overrides = [f"run.output_dir={cache}", f"run.seed={seed}", f"model.model_path={cache}/tiny"]
    model_dir = cache / load_config(warm_start, overrides).run.name / "model"
    if not (model_dir / "config.json").is_file():
        print(f"training the SFT checkpoint ({warm_start}, seed {seed}) into {cache}")
        with prefect_api(cache):
            sft(preset=warm_start, overrides=overrides)
    return model_dir


def from_sft(seed: int, max_iterations: int, target: float, tmp: str, model: Path) -> list:
    """Overrides of a run from the cached SFT ``model``, stopped at ``target`` accuracy."""
    return [
        f"run.seed={seed}",
        f"run.max_iterations={max_iterations}",
        f"run.stop_at_eval_return={target}",
        f"run.output_dir={tmp}/out",
        "run.warm_start=null",  # the cached warm start, given directly
        f"model.model_path={model}",
    ]


def metric_history(summary: dict[str, Any], key: str) -> list[Any]:
    """The run's MLflow history of ``key``, in logging order."""
    client = MlflowClient(summary["tracking_uri"])
    history = client.get_metric_history(summary["mlflow_run_id"], key)
    return sorted(history, key=lambda m: (m.timestamp, m.step))


def rlpipe_time_to(overrides: list[str], out: Path, target: float) -> dict[str, Any]:
    """Run the train flow; updates, training and wall seconds to ``target`` (None if missed)."""
    run = flow_run_metrics(PRESET, overrides, out, ())
    summary = run["summary"]
    step_seconds = {
        key: {m.step: m.value for m in metric_history(summary, f"time/{key}")}
        for key in ("iteration", "evaluate", "checkpoint")
    }
    evals = metric_history(summary, "eval/accuracy")
    before_training = load_config(PRESET, overrides).eval.before_training
    baseline = evals.pop(0) if evals and before_training else None
    result: dict[str, Any] = {
        "before": baseline.value if baseline else None,
        "best": max(m.value for m in evals) if evals else None,
    }
    if baseline is not None and baseline.value >= target:
        wall = baseline.timestamp / 1e3 - run["started"]
        return {**result, "updates": 0, "train": 0.0, "wall": wall, "at": baseline.value}
    hit = next((m for m in evals if m.value >= target), None)
    if hit is None:
        return {**result, "updates": None}
    after = step_seconds["checkpoint"].get(hit.step, 0.0)  # written after the evaluation
    train = sum(
        step_seconds["iteration"][i] - step_seconds["evaluate"].get(i, 0.0)
        for i in range(hit.step + 1)
    )
    wall = hit.timestamp / 1e3 - run["started"] - after
    return {
        **result,
        "updates": hit.step + 1,
        "train": train - after,
        "wall": wall,
        "at": hit.value,
    }


def trl_time_to(overrides: list[str], max_steps: int, target: float) -> dict[str, Any]:
    """Run the TRL anchor; updates and training seconds to ``target`` (None if missed)."""
    spec = {
        "preset": PRESET,
        "overrides": overrides,
        "max_steps": max_steps,
        "evaluate": True,
        "target": target,
    }
    run = run_trl(spec)
    evals, steps = run["evals"], run["step_seconds"]
    result: dict[str, Any] = {
        "before": evals[0]["accuracy"] if evals and evals[0]["step"] == 0 else None,
        "best": max((e["accuracy"] for e in evals if e["step"] > 0), default=None),
        "setup": run["setup_seconds"],
        "step_median": statistics.median(steps) if steps else float("nan"),
    }
    hit = next((e for e in evals if e["accuracy"] >= target), None)
    if hit is None:
        return {**result, "updates": None}
    return {
        **result,
        "updates": hit["step"],
        "train": hit["train_seconds"],
        "wall": hit["wall_seconds"],
        "at": hit["accuracy"],
    }


def pct(value: float | None) -> str:
    """A fraction as a percentage, or n/a."""
    return "n/a" if value is None else f"{value:.1%}"


def describe(name: str, r: dict[str, Any], cap: int, target: float) -> str:
    """One line of the result table."""
    if r["updates"] is None:
        return (
            f"  {name:<22} did NOT reach {target:.0%} within {cap} updates (best {pct(r['best'])})"
        )
    return (
        f"  {name:<22} {r['updates']:>7d} {r['train']:>11.1f} s {r['wall']:>9.1f} s "
        f"{pct(r['at']):>9}"
    )


def main() -> None:
    """Run both sides and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-iterations", type=int, default=120)
    parser.add_argument("--target", type=float, default=0.8)
    args = parser.parse_args()
    model_dir = sft_checkpoint(args.seed)
    with tempfile.TemporaryDirectory(prefix="rlpipe-bench-") as tmp:
        overrides = from_sft(args.seed, args.max_iterations, args.target, tmp, model_dir)
        rlpipe = rlpipe_time_to(overrides, Path(tmp) / "out", args.target)
        trl = trl_time_to(overrides, args.max_iterations, args.target) if trl_available() else None
    cfg = load_config(PRESET, overrides)
    print(
        f"\n{PRESET}, seed {args.seed}: time to {args.target:.0%} held-out accuracy "
        f"({cfg.data.eval_size} prompts, greedy), evaluated every {cfg.run.eval_interval} "
        f"updates; evaluation time excluded from training time"
    )
    print(f"  SFT checkpoint {model_dir}")
    print(
        "  (wall: rlpipe from the start of the run, TRL from the start of its process; "
        "both include start-up and evaluations)"
    )
    print(f"  {'':<22} {'updates':>7} {'training':>13} {'wall':>11} {'accuracy':>9}")
    print(describe("rlpipe train flow", rlpipe, args.max_iterations, args.target))
    if trl is None:
        print(f"  TRL anchor not run: {SETUP_HINT}")
        return
    print(describe("TRL GRPOTrainer", trl, args.max_iterations, args.target))
    print(
        f"  accuracy before RL: rlpipe {pct(rlpipe['before'])}, TRL {pct(trl['before'])}; "
        f"TRL set-up {trl['setup']:.1f} s, median step {trl['step_median']:.3f} s"
    )
    if rlpipe["updates"] is None or trl["updates"] is None:
        print("  no ratio: one side did not reach the target")
        return
    if trl["train"] <= 0:
        print("  no ratio: the SFT checkpoint already meets the target")
        return
    print(
        f"  rlpipe training / TRL training {rlpipe['train'] / trl['train']:.2f}x "
        f"(target <= {TRAIN_RATIO_TARGET:.0f}x)"
    )
    print(
        f"  rlpipe wall / TRL training     {rlpipe['wall'] / trl['train']:.2f}x "
        f"(target <= {WALL_RATIO_TARGET:.0f}x)"
    )


if __name__ == "__main__":
    main()
