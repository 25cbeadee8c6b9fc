"""Start-up of the train CLI: process start → first iteration, against a bare Python start.

Runs, alternately and ``--runs`` times each:
  * anchor: ``python -c "import torch, gymnasium"`` (the floor any PyTorch RL script pays);
  * cold: ``python flows/train.py`` on the preset, with nothing running beforehand: the CLI
    starts its own local Prefect API and local Ray cluster (as a new user runs it);
  * warm (``--stack``): the same command while a local stack (``scripts/stack.py up
    --ray``, started once by this script in a temporary home) is up: the run uses the
    stack's Prefect API, MLflow server and Ray head instead of starting its own.
Each run does two iterations with evaluation and checkpoints off, so the first iteration is
a plain training iteration (the last one also runs the final evaluation). The script
timestamps the CLI's output lines as they arrive and prints, per run and as medians with
their range: seconds to the Prefect API being up (cold), to the first iteration's progress
line, and the whole command.

Usage: python benchmarks/startup.py [--runs 3] [--stack] [--config ppo_cartpole] [overrides...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _stack import SERVICE_VARS, local_stack, stack_env

ROOT = Path(__file__).resolve().parents[1]
MARKS = {"api": "started a local Prefect API", "first": "iter 1/"}


def anchor() -> float:
    """Seconds for a bare Python process that imports torch and gymnasium."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, gymnasium"], check=True)
    return time.perf_counter() - start


def base_env() -> dict[str, str]:
    """This environment without service pointers, one thread per process."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", COLUMNS="200")
    return env


def rlpipe(config: str, overrides: list[str], stack_home: Path | None) -> dict[str, float]:
    """Seconds from the CLI's start to each mark, and to its exit."""
    env = {**base_env(), **stack_env(stack_home)}
    with tempfile.TemporaryDirectory(prefix="rlpipe-startup-") as tmp:
        cmd = [
            sys.executable,
            str(ROOT / "flows" / "train.py"),
            "--config",
            config,
            "run.max_iterations=2",
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
    wanted = ["first"] if stack_home else list(MARKS)
    missing = [m for m in wanted if m not in seen]
    if missing:
        raise RuntimeError(f"marks {missing} not in the output:\n{''.join(lines[-40:])}")
    if stack_home and "api" in seen:
        raise RuntimeError("the warm run started its own Prefect API instead of the stack's")
    return seen


def main() -> None:
    """Run the variants alternately and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config", default="ppo_cartpole")
    parser.add_argument("--stack", action="store_true", help="also measure with a running stack")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    anchors: list[float] = []
    cold: list[dict[str, float]] = []
    warm: list[dict[str, float]] = []
    with local_stack() if args.stack else _nothing() as home:
        for i in range(args.runs):
            anchors.append(anchor())
            cold.append(rlpipe(args.config, args.overrides, None))
            c = cold[-1]
            line = (
                f"run {i + 1}: import torch+gymnasium {anchors[-1]:.1f} s | cold: Prefect API "
                f"{c['api']:.1f} s, first iteration {c['first']:.1f} s, exit {c['exit']:.1f} s"
            )
            if home is not None:
                warm.append(rlpipe(args.config, args.overrides, home))
                w = warm[-1]
                line += f" | warm: first iteration {w['first']:.1f} s, exit {w['exit']:.1f} s"
            print(line, flush=True)

    def show(values: list[float]) -> str:
        return f"{statistics.median(values):6.1f} s [{min(values):.1f}–{max(values):.1f}]"

    print(f"\n{args.config}: medians of {args.runs} runs [range]")
    print(f"  anchor: python -c 'import torch, gymnasium'      {show(anchors)}")
    print(f"  cold: local Prefect API up                       {show([r['api'] for r in cold])}")
    print(f"  cold: process start -> first iteration           {show([r['first'] for r in cold])}")
    print(f"  cold: whole command (2 iterations)               {show([r['exit'] for r in cold])}")
    if warm:
        print(
            f"  warm: process start -> first iteration           {show([r['first'] for r in warm])}"
        )
        print(
            f"  warm: whole command (2 iterations)               {show([r['exit'] for r in warm])}"
        )
    ratio = statistics.median(r["first"] for r in cold) / statistics.median(anchors)
    print(f"  ratio cold first iteration / anchor              {ratio:6.1f}x")


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


if __name__ == "__main__":
    main()
