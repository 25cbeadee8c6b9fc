"""Soak: does the 1,000th iteration cost what the 10th does, and does anything grow unbounded?

Runs a cheap preset (``ppo_cartpole`` with 4 envs x 32 steps) for N iterations through the
train flow, in this process, while a sampler thread records every ``--every`` seconds:
driver RSS, the summed RSS of its child processes in three groups (Ray's worker processes;
Ray's GCS, raylet, dashboard and monitors; the temporary Prefect server), open
file descriptors of the driver, and the sizes of the local Prefect database (the run's
own ``PREFECT_HOME``), the MLflow store (database and artifacts) and the run's output
folder. Afterwards it reads the
per-iteration ``time/orchestration`` back from MLflow and prints:

* orchestration: median of the first 100 iterations (after 5 warm-up ones) against the
  last 100, and their ratio (goal: at most 1.1); its mean and the iterations over 1.5 s
  (pauses a median hides);
* RSS growth per 1,000 iterations, a least-squares slope over the second half of the run
  (goal: under 50 MB for the driver and for the workers);
* the stores' sizes and the driver's descriptors at the start and the end.

Checkpoints use retention (``run.keep_checkpoints=2``), so the output folder stays bounded;
everything else grows with the run and is reported as measured.

With ``PREFECT_API_URL`` set, the run uses that Prefect server, and ``PREFECT_HOME`` names the
folder of its database; otherwise it starts a temporary server with a database of its own.
``tests/integration/test_soak.py`` runs 200 iterations of it through an MLflow outage and a
Prefect server restart.

Usage: python benchmarks/soak.py [--iterations 2000] [--every 2] [--json FILE] [overrides...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from _runs import flow_run_metrics

WARMUP = 5
#: Orchestration and its parts, per iteration (see docs/performance.md).
ORCHESTRATION_PARTS = (
    "time/orchestration",
    "time/orch_flow_start",
    "time/orch_tasks",
    "time/orch_flow_end_and_tracking",
)
#: The process groups whose memory is followed (the goal applies to the driver and workers).
RSS_GROUPS = ("driver_rss", "workers_rss", "ray_system_rss", "prefect_rss")
WINDOW = 100
#: An iteration whose orchestration takes longer than this counts as a pause.
SLOW_S = 1.5
MB = 1024 * 1024


@dataclass
class Sample:
    """One reading of the process tree and the stores."""

    at: float
    driver_rss: float
    workers_rss: float
    ray_system_rss: float
    prefect_rss: float
    by_process: dict[str, float]
    fds: int
    prefect_db: float
    mlflow_store: float
    output_dir: float


def folder_bytes(path: Path) -> float:
    """Bytes of the file ``path``, or of every file under the folder ``path`` (0: missing)."""
    if path.is_file():
        return float(path.stat().st_size)
    if not path.exists():
        return 0.0
    total = 0
    for child in path.rglob("*"):
        try:
            if child.is_file():
                total += child.stat().st_size
        except OSError:  # removed while walking (retention, rotation)
            continue
    return float(total)


def sample(out: Path, run_name: str, prefect_home: Path) -> Sample:
    """Read the driver's and its children's memory, descriptors and the stores' sizes."""
    me = psutil.Process()
    rss = {"workers": 0.0, "ray_system": 0.0, "prefect": 0.0}
    by_process: dict[str, float] = {}
    for child in me.children(recursive=True):
        try:
            group, label = process_group(child)
            used = child.memory_info().rss
        except psutil.Error:
            continue
        rss[group] += used
        by_process[label] = by_process.get(label, 0.0) + used
    return Sample(
        at=time.time(),
        driver_rss=float(me.memory_info().rss),
        workers_rss=rss["workers"],
        ray_system_rss=rss["ray_system"],
        prefect_rss=rss["prefect"],
        by_process=by_process,
        fds=me.num_fds(),
        prefect_db=folder_bytes(prefect_home),
        mlflow_store=folder_bytes(out / "mlartifacts") + folder_bytes(out / "mlflow.db"),
        output_dir=folder_bytes(out / run_name),
    )


#: Ray's own processes that carry a ``ray::`` title like the workers do.
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def process_group(process: psutil.Process) -> tuple[str, str]:
    """The group of a child process and its label.

    Groups: ``prefect`` (the temporary Prefect server), ``workers`` (Ray's worker processes,
    which host rlpipe's actors and tasks) or ``ray_system`` (GCS, raylet, dashboard, agents,
    monitors). Labels: the ``ray::`` title, the executable's or Python script's name.
    """
    for proc in (process, *process.parents()):
        cmdline = proc.cmdline()
        if "prefect" in " ".join(cmdline[:4]) and "server" in cmdline:
            return "prefect", "prefect server"
    cmdline = process.cmdline()
    title = cmdline[0] if cmdline else process.name()
    if title.startswith("ray::"):
        return ("ray_system" if title in RAY_AGENTS else "workers"), title.split(".")[0]
    scripts = [Path(arg).name for arg in cmdline[1:3] if arg.endswith(".py")]
    label = scripts[0] if scripts else Path(title).name
    return ("workers" if label == "default_worker.py" else "ray_system"), label


def sampler(
    out: Path, run_name: str, prefect_home: Path, every: float, stop: threading.Event
) -> list[Sample]:
    """Start a thread sampling until ``stop`` is set; returns the (growing) list."""
    samples: list[Sample] = []

    def loop() -> None:
        while not stop.wait(every):
            samples.append(sample(out, run_name, prefect_home))

    threading.Thread(target=loop, name="soak-sampler", daemon=True).start()
    return samples


def slope_per_1000(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(iteration, value)`` points, per 1,000 iterations."""
    if len(points) < 2:
        return float("nan")
    xs, ys = zip(*points, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return float("nan")
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def deciles_ms(values: list[float]) -> list[float]:
    """The median of each tenth of ``values`` (in order), in milliseconds."""
    tenth = max(1, len(values) // 10)
    chunks = [values[i : i + tenth] for i in range(0, len(values), tenth)][:10]
    return [round(1000 * statistics.median(chunk), 1) for chunk in chunks if chunk]


def iteration_at(times: list[float], at: float) -> int:
    """How many iterations had been logged by the wall-clock time ``at``."""
    return sum(1 for t in times if t <= at)


def soak(iterations: int, every: float, overrides: list[str]) -> dict:
    """Run the soak; returns its figures (what :func:`report` prints)."""
    run_name = "soak"
    with tempfile.TemporaryDirectory(prefix="rlpipe-soak-") as tmp:
        out = Path(tmp)
        if os.environ.get("PREFECT_API_URL"):  # that server; PREFECT_HOME names its folder
            prefect_home = Path(os.environ.get("PREFECT_HOME", out / "unknown-prefect-home"))
        else:  # a temporary server with its database in a PREFECT_HOME of its own
            prefect_home = out / "prefect-home"
            os.environ["PREFECT_HOME"] = str(prefect_home)
        overrides = [
            "env.num_envs=4",
            "rollout.num_steps=32",
            "run.eval_interval=0",
            "run.checkpoint_interval=50",
            "run.keep_checkpoints=2",
            "run.stop_at_eval_return=null",
            "tracking.system_metrics=false",
            "tracking.learning_curve=false",
            *overrides,
            f"run.max_iterations={iterations}",
            f"run.output_dir={tmp}",
            f"run.name={run_name}",
        ]
        stop = threading.Event()
        samples = sampler(out, run_name, prefect_home, every, stop)
        started = time.perf_counter()
        run = flow_run_metrics("ppo_cartpole", overrides, out, ORCHESTRATION_PARTS)
        wall = time.perf_counter() - started
        stop.set()
        stores = sample(out, run_name, prefect_home)  # after the run (its processes are gone)
        from mlflow.tracking import MlflowClient

        client = MlflowClient(run["summary"]["tracking_uri"])
        history = client.get_metric_history(run["summary"]["mlflow_run_id"], "time/iteration")
        logged_at = sorted(m.timestamp / 1000 for m in history)
        checkpoints = sorted(p.name for p in (out / run_name / "checkpoints").glob("step_*"))
    samples = samples or [stores]
    # the last reading while the run was still iterating
    final = ([s for s in samples if s.at <= logged_at[-1]] or samples)[-1]
    orch = run["series"]["time/orchestration"]
    n = len(orch)
    first, last = orch[WARMUP : WARMUP + WINDOW], orch[-WINDOW:]
    med = statistics.median
    # the second half of the iterations, not the shutdown after them (processes leave then)
    half = [s for s in samples if iteration_at(logged_at, s.at) >= n // 2 and s.at <= logged_at[-1]]
    growth = {
        name: slope_per_1000([(iteration_at(logged_at, s.at), getattr(s, name) / MB) for s in half])
        for name in RSS_GROUPS
    }
    labels = sorted({label for s in half for label in s.by_process})
    by_process = {
        label: slope_per_1000(
            [(iteration_at(logged_at, s.at), s.by_process.get(label, 0.0) / MB) for s in half]
        )
        for label in labels
    }
    warm = [s for s in samples if iteration_at(logged_at, s.at) > WARMUP]
    return {
        "iterations": n,
        "logged_steps": sorted(m.step for m in history),
        "wall_s": wall,
        "orch_first_ms": 1000 * med(first),
        "orch_last_ms": 1000 * med(last),
        "orch_ratio": med(last) / med(first),
        "orch_mean_ms": 1000 * statistics.mean(orch[WARMUP:] or orch),
        "orch_slow": [i for i, x in enumerate(orch) if i >= WARMUP and x > SLOW_S],
        "first_window": [WARMUP + 1, WARMUP + len(first)],
        "last_window": len(last),
        "mb": {
            name: [getattr(samples[0], name) / MB, getattr(final, name) / MB] for name in RSS_GROUPS
        },
        "growth_mb_per_1000": growth,
        "growth_by_process_mb_per_1000": by_process,
        "stores_mb": {
            name: [getattr(samples[0], name) / MB, getattr(stores, name) / MB]
            for name in ("prefect_db", "mlflow_store", "output_dir")
        },
        "fds": [samples[0].fds, warm[0].fds if warm else samples[0].fds, final.fds],
        "checkpoints": checkpoints,
        # per iteration, for finding where a drift comes from (seconds)
        "series": run["series"],
        "orch_deciles_ms": deciles_ms(orch),
    }


def report(f: dict) -> None:
    """Print the figures of :func:`soak`."""
    n = f["iterations"]
    print(f"\nsoak: ppo_cartpole, {n} iterations in {f['wall_s'] / 60:.1f} min")
    a, b = f["first_window"]
    print(f"  orchestration, iterations {a}-{b}: {f['orch_first_ms']:6.1f} ms (median)")
    print(
        f"  orchestration, last {f['last_window']} iterations:   {f['orch_last_ms']:6.1f} ms (median)"
    )
    print(f"  ratio last / first: {f['orch_ratio']:.3f} (goal <= 1.1)")
    print(f"  orchestration by tenth of the run (medians, ms): {f['orch_deciles_ms']}")
    print(
        f"  orchestration mean after warm-up: {f['orch_mean_ms']:.1f} ms; "
        f"{len(f['orch_slow'])} iterations over {SLOW_S} s"
    )
    for name, (start_mb, end_mb) in f["mb"].items():
        print(
            f"  {name:<14} {start_mb:7.0f} MB at the first sample, {end_mb:7.0f} MB at the end; "
            f"growth {f['growth_mb_per_1000'][name]:+.1f} MB / 1,000 iterations "
            "(second half; goal < 50)"
        )
    growing = {k: v for k, v in f["growth_by_process_mb_per_1000"].items() if abs(v) >= 5}
    if growing:
        print(
            "  by process (>= 5 MB / 1,000 iterations): "
            + ", ".join(f"{k} {v:+.1f}" for k, v in sorted(growing.items(), key=lambda kv: -kv[1]))
        )
    labels = {
        "prefect_db": "Prefect database",
        "mlflow_store": "MLflow store",
        "output_dir": "run folder",
    }
    for name, (start_mb, end_mb) in f["stores_mb"].items():
        per_1000 = 1000 * (end_mb - start_mb) / max(n, 1)
        print(
            f"  {labels[name]:<17} {start_mb:8.1f} MB -> {end_mb:8.1f} MB ({per_1000:+.1f} MB / 1,000 it)"
        )
    first, warm, end = f["fds"]
    print(
        f"  driver descriptors: {first} at the first sample, {warm} after warm-up, {end} at the end"
    )
    print(f"  checkpoints kept: {', '.join(f['checkpoints'])} (run.keep_checkpoints=2)")


def main() -> None:
    """Run the soak and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    figures = soak(args.iterations, args.every, args.overrides)
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
