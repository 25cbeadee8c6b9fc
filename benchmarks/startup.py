"""Start-up of the train CLI: process start → first iteration, against a bare Python start.

Runs, alternately and ``--runs`` times each:
  * anchor: ``python -c "import torch, gymnasium"`` (the floor any PyTorch RL script pays);
  * rlpipe: ``python flows/train.py`` on the preset, one iteration, evaluation and
    checkpoints off, with a local Prefect API started by the CLI (as a new user runs it).
It timestamps the CLI's output lines as they arrive and prints, per run and as medians
with their range: seconds to the Prefect API being up, to the first iteration's line, and
the whole command.

Usage: python benchmarks/startup.py [--runs 3] [--config ppo_cartpole] [overrides...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKS = {"api": "started a local Prefect API", "first": "iter 1/"}


def anchor() -> float:
    """Seconds for a bare Python process that imports torch and gymnasium."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, gymnasium"], check=True)
    return time.perf_counter() - start


def rlpipe(config: str, overrides: list[str]) -> dict[str, float]:
    """Seconds from the CLI's start to each mark, and to its exit."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "RAY_ADDRESS")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", COLUMNS="200")
    with tempfile.TemporaryDirectory(prefix="rlpipe-startup-") as tmp:
        cmd = [
            sys.executable,
            str(ROOT / "flows" / "train.py"),
            "--config",
            config,
            "run.max_iterations=1",
            "run.eval_interval=0",
            "run.checkpoint_interval=0",
            "run.stop_at_eval_return=null",
            "tracking.system_metrics=false",
            f"run.output_dir={tmp}",
            *overrides,
        ]
        start = time.perf_counter()
        seen: dict[str, float] = {}
        lines: list[str] = []
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            for name, text in MARKS.items():
                if name not in seen and text in line:
                    seen[name] = time.perf_counter() - start
        if proc.wait() != 0:
            raise RuntimeError(f"the run failed:\n{''.join(lines[-40:])}")
        seen["exit"] = time.perf_counter() - start
    missing = [m for m in MARKS if m not in seen]
    if missing:
        raise RuntimeError(f"marks {missing} not in the output:\n{''.join(lines[-40:])}")
    return seen


def main() -> None:
    """Run both alternately and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config", default="ppo_cartpole")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    anchors, runs = [], []
    for i in range(args.runs):
        anchors.append(anchor())
        runs.append(rlpipe(args.config, args.overrides))
        r = runs[-1]
        print(
            f"run {i + 1}: import torch+gymnasium {anchors[-1]:.1f} s | rlpipe: Prefect API "
            f"{r['api']:.1f} s, first iteration {r['first']:.1f} s, exit {r['exit']:.1f} s",
            flush=True,
        )

    def show(values: list[float]) -> str:
        return f"{statistics.median(values):6.1f} s [{min(values):.1f}–{max(values):.1f}]"

    print(f"\n{args.config}: medians of {args.runs} runs [range]")
    print(f"  anchor: python -c 'import torch, gymnasium'   {show(anchors)}")
    print(f"  rlpipe: local Prefect API up                 {show([r['api'] for r in runs])}")
    print(f"  rlpipe: process start -> first iteration     {show([r['first'] for r in runs])}")
    print(f"  rlpipe: whole command (1 iteration)          {show([r['exit'] for r in runs])}")
    ratio = statistics.median(r["first"] for r in runs) / statistics.median(anchors)
    print(f"  ratio first iteration / anchor               {ratio:6.1f}x")


if __name__ == "__main__":
    main()
