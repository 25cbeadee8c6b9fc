"""Where does a child flow + thin tasks cost go? Prints per-iteration ms for variants.

Usage: python benchmarks/prefect_floor.py [--iterations 20]
Needs PREFECT_API_URL (starts a local server if unset). No Ray, no workers: pure floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.settings import (  # noqa: E402
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)

from infra.ops.prefect_api import ensure_prefect_api  # noqa: E402


@task(cache_policy=NO_CACHE, persist_result=False, task_run_name="step-{i}")
def step(i: int) -> dict:
    return {"seconds": 0.0}


@flow(persist_result=False, flow_run_name="child-{i}", validate_parameters=False)
def child(i: int, n_tasks: int) -> None:
    for _ in range(n_tasks):
        step(i)


def _children(iterations: int, n_tasks: int) -> list[float]:
    times = []
    for i in range(iterations):
        t0 = time.perf_counter()
        child(i, n_tasks)
        times.append(time.perf_counter() - t0)
    return times


@flow(persist_result=False)
def parent(iterations: int, n_tasks: int, heartbeat_off: bool) -> list[float]:
    if not heartbeat_off:
        return _children(iterations, n_tasks)
    # As flows/train.py does: one settings change around the whole loop (a settings
    # context per child flow is itself expensive: it rebuilds clients).
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        return _children(iterations, n_tasks)


@flow(persist_result=False)
def tasks_only(iterations: int, n_tasks: int) -> list[float]:
    times = []
    for i in range(iterations):
        t0 = time.perf_counter()
        for _ in range(n_tasks):
            step(i)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=7)
    args = parser.parse_args()
    import os

    server = ensure_prefect_api(Path("outputs/.prefect-bench"))
    try:
        with temporary_settings({PREFECT_API_URL: os.environ["PREFECT_API_URL"]}):
            rows = {
                f"{args.tasks} tasks in flow thread (no child flow)": tasks_only(
                    args.iterations, args.tasks
                ),
                "child flow + tasks (stock)": parent(args.iterations, args.tasks, False),
                "child flow + tasks (heartbeat off)": parent(args.iterations, args.tasks, True),
            }
        for name, times in rows.items():
            steady = times[2:]
            print(
                f"{name:45s} median {1000 * statistics.median(steady):7.1f} ms  "
                f"p90 {1000 * sorted(steady)[int(0.9 * len(steady))]:7.1f} ms"
            )
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
