"""Where a short training run's CPU goes, process by process.

Starts a Prefect API server (as the integration tests share one), then runs ``python
flows/train.py`` on the preset ``--runs`` times. While a run trains, the driver and every
process it starts (Ray's processes and workers) are sampled with psutil every 0.2 s; the last
sample of each is its CPU time (user + system), so the last 0.2 s of a process are not
counted. Prints, per run and as medians with their range: the run's wall time, the CPU of
the driver, of each kind of Ray worker (named by the actor class it hosts; ``ray::IDLE``
are task workers: fan-out evaluation, warm-up tasks), of Ray's own processes (GCS, raylet,
dashboard, agents, monitors) and of the shared Prefect API server, and the whole machine's
busy CPU over the run (``/proc/stat``; it also counts what else runs meanwhile, so run the
script on an otherwise idle machine).

Usage: python benchmarks/run_cpu.py [--runs 3] [--config ppo_cartpole] [overrides...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
from _spread import spread

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.ops.prefect_api import LocalPrefectServer  # noqa: E402

#: The short run the integration tests make of the default preset (small_cartpole_run).
DEFAULT_OVERRIDES = (
    "run.max_iterations=3",
    "run.eval_interval=1",
    "env.num_envs=4",
    "rollout.num_steps=32",
    "eval.num_episodes=2",
    "tracking.learning_curve=false",
    "eval.video=false",
)
#: Ray's own processes, by a word of their command line.
RAY_SERVICES = (
    "gcs_server",
    "raylet",
    "dashboard.py",
    "DashboardAgent",
    "RuntimeEnvAgent",
    "monitor.py",
    "log_monitor",
)


def busy_seconds() -> float:
    """CPU seconds the machine has spent busy since boot (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def category(cmdline: str, driver_pid: int, pid: int) -> str:
    """The row a process's CPU is counted in."""
    if pid == driver_pid:
        return "driver (flows/train.py)"
    for word in RAY_SERVICES:
        if word in cmdline:
            return "Ray's own processes"
    if cmdline.startswith("ray::"):
        return cmdline.split()[0]
    return "other"


def process_tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and every process it started (empty once it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds of ``proc`` (0 once it is gone)."""
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


class Sampler(threading.Thread):
    """Samples the CPU time of a process and of everything it starts, until stopped."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.last: dict[tuple[int, float], tuple[float, str]] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            for proc in process_tree(self.root):
                try:
                    with proc.oneshot():
                        key = (proc.pid, proc.create_time())
                        self.last[key] = (cpu_seconds(proc), " ".join(proc.cmdline()))
                except psutil.Error:
                    continue
            time.sleep(0.2)


def server_cpu(server: LocalPrefectServer) -> float:
    """CPU seconds of the Prefect API server's processes so far."""
    return sum(cpu_seconds(proc) for proc in process_tree(server.process.pid))


def one_run(
    config: str, overrides: list[str], env: dict[str, str], server
) -> tuple[Counter, float, float]:
    """CPU seconds of one run by row, its wall time and the machine's busy CPU meanwhile."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-run-cpu-") as out:
        cmd = [sys.executable, str(ROOT / "flows" / "train.py"), "--config", config]
        cmd += [f"run.output_dir={out}", *overrides]
        busy, served = busy_seconds(), server_cpu(server)
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        sampler = Sampler(proc.pid)
        sampler.start()
        _, err = proc.communicate()
        wall = time.perf_counter() - start
        sampler.stopped.set()
        sampler.join()
        if proc.returncode != 0:
            raise SystemExit(f"the run failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    rows: Counter = Counter()
    for (pid, _), (cpu, cmdline) in sampler.last.items():
        rows[category(cmdline, proc.pid, pid)] += cpu
    rows["Prefect API server (shared)"] = server_cpu(server) - served
    return rows, wall, busy_seconds() - busy


def main() -> None:
    """Run the preset ``--runs`` times and print where its CPU went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config", default="ppo_cartpole")
    parser.add_argument("overrides", nargs="*", help="default: the tests' short CartPole run")
    args = parser.parse_args()
    overrides = args.overrides or list(DEFAULT_OVERRIDES)
    with tempfile.TemporaryDirectory(prefix="rlpipe-run-cpu-api-") as home:
        server = LocalPrefectServer(
            Path(home) / "server.log", extra_env={"PREFECT_HOME": str(Path(home))}
        )
        try:
            server.wait_healthy(timeout=120)
            env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
            env.update(OMP_NUM_THREADS="1", PREFECT_API_URL=server.url)
            env["PREFECT_HOME"] = str(Path(home) / "client")
            runs, walls, busy = [], [], []
            for k in range(args.runs):
                rows, wall, machine = one_run(args.config, overrides, env, server)
                runs.append(rows)
                walls.append(wall)
                busy.append(machine)
                print(f"run {k + 1}: wall {wall:.1f} s", flush=True)
        finally:
            server.stop()
    print(f"\n{args.config} {' '.join(overrides)}: CPU seconds, median [range] of {args.runs}")
    keys = sorted({key for run in runs for key in run})
    keys.sort(key=lambda key: -statistics.median(run[key] for run in runs))
    for key in keys:
        print(f"  {spread([run[key] for run in runs], '{:.1f}'):>18}  {key}")
    print(f"  {spread([sum(run.values()) for run in runs], '{:.1f}'):>18}  all counted")
    print(f"  {spread(busy, '{:.1f}'):>18}  machine busy CPU (/proc/stat)")
    print(f"  {spread(walls, '{:.1f}'):>18}  wall time of the run")


if __name__ == "__main__":
    main()
