"""Deadlines and heartbeat liveness of worker groups on a real local Ray cluster.

A worker busy in a long step answers heartbeats and is not declared dead, while its step
methods still run one at a time on one thread; a step that hangs is killed at its deadline
and respawned; a worker holding the GIL is caught by its missed heartbeats; a SIGKILLed
worker is reported dead at once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
import ray
from ray.exceptions import RayActorError

from infra.cluster.deadlines import Liveness, StepTimeout, wait_for
from infra.cluster.placement import GroupPlacement
from infra.cluster.ray_cluster import connect, shutdown
from infra.cluster.worker_group import WorkerGroup
from infra.processes import pid_alive
from rl_core.config import RLPipeConfig
from tests.toy_workers import ToyWorker

LIVENESS = Liveness(interval_s=0.5, timeout_s=3.0)


@pytest.fixture(scope="module")
def group() -> Iterator[WorkerGroup]:
    """Two toy workers (no CPU reservation) on a 2-CPU local cluster."""
    connect(num_cpus=2)
    config = RLPipeConfig().model_dump(mode="json")
    workers = WorkerGroup(
        "toy", ToyWorker, 2, GroupPlacement((), 0.0), lambda r: (config, r, ()), LIVENESS
    )
    workers.wait_started(timeout=120)
    try:
        yield workers
    finally:
        workers.shutdown()
        shutdown()


def _respawn(group: WorkerGroup, rank: int) -> None:
    group.respawn(rank)
    group.wait_started(timeout=120)


def test_a_busy_worker_answers_heartbeats_and_runs_steps_one_at_a_time(
    group: WorkerGroup,
) -> None:
    busy = group[0].work.remote(15.0)
    serial = [group[1].work.remote(0.3) for _ in range(4)]
    time.sleep(1.0)

    start = time.monotonic()
    assert group.dead_ranks() == []
    assert time.monotonic() - start < 1.0  # answered while busy, not after the step

    # Waiting with heartbeats every 0.5 s (3 s timeout) lets the 15 s step finish.
    assert group.get([busy], timeout_s=30.0, step="update", ranks=[0]) == [0]
    assert group.get(serial, timeout_s=30.0, step="update", ranks=[1, 1, 1, 1]) == [1] * 4

    spans = ray.get(group[1].step_spans.remote())
    assert len({thread for thread, _, _ in spans}) == 1  # always the same thread
    for (_, _, end), (_, start_next, _) in zip(spans, spans[1:], strict=False):
        assert start_next >= end  # never two step calls at once


def test_a_hung_step_is_killed_at_its_deadline_and_respawned(group: WorkerGroup) -> None:
    pid = group.processes[1].pid
    hung = group[1].hang.remote()
    start = time.monotonic()
    with pytest.raises(StepTimeout) as info:
        group.get([hung], timeout_s=4.0, step="rollout", ranks=[1])
    elapsed = time.monotonic() - start

    assert 4.0 <= elapsed < 4.0 + 5.0
    assert str(info.value) == (
        f"rollout exceeded its deadline of 4 s (timeouts.rollout); killed toy worker 1 (pid {pid})"
    )
    assert info.value.killed == [f"toy worker 1 (pid {pid})"]
    assert not pid_alive(pid)
    assert group.dead_ranks() == [1]

    _respawn(group, 1)
    assert group.processes[1].pid != pid
    assert group.work(0.0, within=("rollout", 10.0)) == [0, 1]


def test_a_worker_that_stops_answering_heartbeats_is_killed_before_the_deadline(
    group: WorkerGroup,
) -> None:
    pid = group.processes[0].pid
    stuck = group[0].hold_gil.remote()
    start = time.monotonic()
    with pytest.raises(StepTimeout) as info:
        group.get([stuck], timeout_s=60.0, step="update", ranks=[0])
    elapsed = time.monotonic() - start

    assert elapsed < LIVENESS.timeout_s + LIVENESS.interval_s + 3.0
    assert str(info.value) == (
        "update: no heartbeat from toy worker 0 within 3 s (timeouts.heartbeat_timeout_s); "
        f"killed toy worker 0 (pid {pid})"
    )
    assert not pid_alive(pid)
    _respawn(group, 0)


def test_a_sigkilled_worker_fails_its_step_and_is_reported_dead_at_once(
    group: WorkerGroup,
) -> None:
    pid = group.processes[0].pid
    step = group[0].work.remote(30.0)
    time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)

    start = time.monotonic()
    with pytest.raises(RayActorError):
        group.get([step], timeout_s=60.0, step="update", ranks=[0])
    assert group.dead_ranks() == [0]
    assert time.monotonic() - start < LIVENESS.timeout_s

    _respawn(group, 0)
    assert group.dead_ranks() == []


@ray.remote(num_cpus=0)
def _sleep_forever() -> None:
    while True:
        time.sleep(0.05)


def test_a_ray_task_past_its_deadline_is_cancelled(group: WorkerGroup) -> None:
    task = _sleep_forever.remote()
    with pytest.raises(StepTimeout, match=r"^evaluate exceeded its deadline of 2 s"):
        wait_for([task], [None], timeout_s=2.0, step="evaluate")
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(task, timeout=30)
