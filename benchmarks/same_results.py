"""Train the same short runs from two checkouts and compare what they log and save.

Each run goes through the real train flow (``flows/train.py``) of its checkout, with the
same seeds. Every logged metric value (wall-clock times and rates left out) and every
checkpoint weight file (``*.safetensors`` under ``checkpoints/``) are compared exactly. Use
it to show that a change leaves training bit-identical on the CPU.

Usage:
  python benchmarks/same_results.py BEFORE_CHECKOUT AFTER_CHECKOUT WORK_DIR [PRESET ...]

  git worktree add /tmp/before <commit>   # a checkout of the commit to compare against
  python scripts/build_tiny_lm.py /tmp/tiny-lm   # the language-model presets' model
  python benchmarks/same_results.py /tmp/before . /tmp/same-results
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

TINY_LM = os.environ.get("RLPIPE_TINY_LM", "/tmp/tiny-lm")
#: Preset → overrides of a short run.
RUNS = {
    "ppo_cartpole": ["run.max_iterations=4", "eval.video=false"],
    "sac_pendulum": ["run.max_iterations=3"],
    "grpo_arith": [
        "run.max_iterations=3",
        "run.warm_start=null",
        f"model.model_path={TINY_LM}",
        "run.eval_interval=2",
    ],
    "rm_arith": ["run.max_iterations=3", "run.warm_start=null", f"model.model_path={TINY_LM}"],
}
#: Metrics that measure time, not training.
TIMING = ("time/", "system/", "perf/", "throughput/", "cost/")
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
}


def train(root: Path, preset: str, overrides: list[str], out: Path) -> float:
    """Train ``preset`` with ``root``'s code into ``out``; returns the wall seconds."""
    cmd = [sys.executable, str(root / "flows" / "train.py"), "--config", preset]
    cmd += [f"run.output_dir={out}", "tracking.learning_curve=false", *overrides]
    start = time.time()
    env = {**ENV, "PYTHONPATH": str(root)}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit(f"{preset} failed with the code of {root}")
    return time.time() - start


def metrics(out: Path) -> dict[tuple[str, int], float]:
    """Every logged metric value of the run's MLflow store but the timings."""
    db = sqlite3.connect(out / "mlflow.db")
    rows = db.execute("select key, step, value from metrics order by key, step, timestamp")
    return {
        (key, step): value
        for key, step, value in rows
        if not key.startswith(TIMING) and "seconds" not in key and "per_s" not in key
    }


def weights(out: Path) -> dict[str, str]:
    """Checkpoint weight file (path under ``out``) → its sha256."""
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(out.rglob("*.safetensors"))
        if "checkpoints" in path.parts and "mlartifacts" not in path.parts
    }


def compare(before: Path, after: Path, work: Path, preset: str) -> dict[str, object]:
    """Train ``preset`` with both checkouts and say what differs."""
    found = {}
    for name, root in (("before", before), ("after", after)):
        out = work / preset / name
        seconds = train(root, preset, RUNS[preset], out)
        found[name] = (metrics(out), weights(out), seconds)
    (mb, wb, sb), (ma, wa, sa) = found["before"], found["after"]
    common = set(mb) & set(ma)
    return {
        "metric values compared": len(common),
        "metric values differing": sorted(k for k in common if mb[k] != ma[k])[:5],
        "metrics only before": sorted({k for k, _ in set(mb) - set(ma)}),
        "metrics only after": sorted({k for k, _ in set(ma) - set(mb)}),
        "checkpoint weight files": len(wb),
        "weights identical": wb == wa,
        "seconds before / after": [round(sb, 1), round(sa, 1)],
    }


def main() -> None:
    """Compare the presets named on the command line (all of :data:`RUNS` by default)."""
    before, after, work = (Path(arg).resolve() for arg in sys.argv[1:4])
    presets = sys.argv[4:] or list(RUNS)
    report = {}
    for preset in presets:
        report[preset] = compare(before, after, work, preset)
        print(preset, json.dumps(report[preset]), flush=True)
    (work / "same_results.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
