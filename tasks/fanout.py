"""Stateless fan-out work (reward scoring, evaluation episodes, videos) as parallel tasks.

A runtime hands out :class:`~infra.driver.step_runtime.FanoutJob` lists; each job runs as one
Prefect task on the Ray cluster (the iteration flow's ``RayTaskRunner``), named
``<job name>-<iteration>-<part>`` in the Prefect UI. The jobs are stateless, so a failed
one is retried at task level (a crashed Ray worker is also retried by Ray itself).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from prefect import Task, task
from prefect_ray.context import remote_options

from infra.cluster.deadlines import StepTimeout
from infra.driver.faults import fire_once
from infra.driver.step_runtime import FanoutJob
from tasks.options import STEP_OPTIONS

logger = logging.getLogger(__name__)
#: Attempts of a fan-out task after the first (the work is stateless).
FANOUT_RETRIES = 2


def run_job(job: FanoutJob, iteration: int, part: int) -> Any:
    """Run one job (in a Ray worker, or in the flow); an injected fault fires first, once."""
    fire_once(job.fault, f"{job.name}-{iteration}-{part}")
    return job.fn(**job.kwargs)


def _run_job_timed(job: FanoutJob, iteration: int, part: int) -> tuple[Any, float]:
    """:func:`run_job` in a fan-out task: its result and the seconds it computed."""
    start = time.perf_counter()
    result = run_job(job, iteration, part)
    return result, time.perf_counter() - start


_TASKS: dict[str, Task] = {}


def fanout_task(name: str) -> Task:
    """The Prefect task that runs jobs named ``name`` (one task definition per name)."""
    if name not in _TASKS:
        _TASKS[name] = task(
            _run_job_timed,
            name=name,
            task_run_name=name + "-{iteration}-{part}",
            retries=FANOUT_RETRIES,
            retry_delay_seconds=0,
            **STEP_OPTIONS,
        )
    return _TASKS[name]


def submit_jobs(jobs: list[FanoutJob], iteration: int) -> list[Any]:
    """Submit every job as a parallel task; returns their futures."""
    # Worker groups hold the CPU reservations; fan-out tasks share those CPUs.
    with remote_options(num_cpus=0):
        return [fanout_task(job.name).submit(job, iteration, i) for i, job in enumerate(jobs)]


def run_jobs(
    jobs: list[FanoutJob], iteration: int, timeout_s: float | None = None, step: str = "evaluate"
) -> list[Any] | None:
    """Run ``jobs`` in parallel and return their results in order (None when no jobs).

    See :func:`run_jobs_timed` for the arguments; this drops the compute time.
    """
    return run_jobs_timed(jobs, iteration, timeout_s, step)[0]


def run_jobs_timed(
    jobs: list[FanoutJob], iteration: int, timeout_s: float | None = None, step: str = "evaluate"
) -> tuple[list[Any] | None, float]:
    """Run ``jobs`` in parallel; their results in order (None when no jobs) and compute time.

    Args:
        jobs: The jobs.
        iteration: Iteration index (task run names).
        timeout_s: Deadline for all of them together (``timeouts.<step>``).
        step: The step running them (named in a timeout).

    Returns:
        The results, and the longest job's own seconds (the jobs run side by side; the
        rest of the wall time is task scheduling, i.e. orchestration).

    Raises:
        StepTimeout: The deadline passed; the jobs' Ray tasks were cancelled (their worker
            processes killed).
    """
    if not jobs:
        return None, 0.0
    futures = submit_jobs(jobs, iteration)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    results, longest = [], 0.0
    for future in futures:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            result, seconds = future.result(timeout=remaining)
            results.append(result)
            longest = max(longest, seconds)
        except TimeoutError:
            for pending in futures:
                _cancel(pending)
            raise StepTimeout(
                f"{step} exceeded its deadline of {timeout_s:g} s (timeouts.{step}); "
                f"cancelled its {len(futures)} {jobs[0].name} task(s)",
                step,
                [],
            ) from None
    return results, longest


def _cancel(future: Any) -> None:
    try:
        ray.cancel(future.wrapped_future, force=True)
    except Exception:  # noqa: BLE001 - already finished or gone
        logger.debug("could not cancel %s", future, exc_info=True)
