"""The agent presets end to end: warm start, then GRPO; held-out figures before and after.

Runs ``python flows/train.py --config PRESET`` for each preset in a fresh output folder (its
warm start runs first, automatically), then reads the run's MLflow store and prints, per
preset, the evaluation metrics at the first evaluation (the warm-started model, before any
RL) and at the last, and the training-batch metrics of the first and last iterations, with
the wall time. The figures in docs/agents.md come from it.

Usage:
  python benchmarks/agent_presets.py [--presets agent_calc,code_tests] [--out DIR]
                                     [override ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The metrics printed for each preset (those it logs).
METRICS = (
    "eval/accuracy",
    "eval/accuracy/mul",
    "eval/accuracy/add",
    "eval/agent/mul/tool_call_rate",
    "eval/agent/add/tool_call_rate",
    "eval/return_mean",
    "eval/pass_at_4",
    # training batches (sampled): does a call pay on additions? (reward before the call cost)
    "agent/add/tool_call_rate",
    "agent/add/reward_with_tool",
    "agent/add/reward_without_tool",
)


def run_preset(preset: str, out: Path, overrides: list[str]) -> float:
    """Train ``preset`` (and its warm start) into ``out``; the wall seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "flows" / "train.py"), "--config", preset]
    cmd += [f"run.output_dir={out}", *overrides]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{preset} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return time.perf_counter() - start


def figures(out: Path, run_name: str) -> dict[str, tuple[float, float]]:
    """``metric → (first evaluation, last evaluation)`` of the run named ``run_name``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, f"attributes.run_name = '{run_name}'")
    found = {}
    for key in METRICS:
        history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
        if history:
            found[key] = (history[0].value, history[-1].value)
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the presets and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="agent_calc,code_tests")
    parser.add_argument("--out", default=None, help="output folder (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="section.field=value for every preset")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from rl_core.config import load_config

    root = Path(args.out or tempfile.mkdtemp(prefix="rlpipe-agent-presets-")).resolve()
    for preset in args.presets.split(","):
        out = root / preset
        seconds = run_preset(preset, out, args.overrides)
        name = load_config(preset, args.overrides).run.name
        print(f"\n{preset} ({seconds / 60:.1f} min, warm start included; outputs in {out})")
        print("| metric | first (warm-started) | last (after GRPO) |\n| --- | --- | --- |")
        for key, (first, last) in figures(out, name).items():
            print(f"| `{key}` | {first:.3f} | {last:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
