"""Worker methods called as attributes of their group on a real local Ray cluster.

Calls are split and reduced as the worker class declares them, wait with a step's deadline
(a hung rank is killed and named as by ``WorkerGroup.get``), and an unknown method is
refused with the methods the class has.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from infra.cluster.deadlines import Liveness, StepTimeout
from infra.cluster.dispatch import PerRank
from infra.cluster.group_calls import Handle
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


def test_undeclared_methods_go_to_every_rank_and_return_the_list(group: WorkerGroup) -> None:
    assert group.work(0.0) == [0, 1]
    assert group.work(0.0, within=("rollout", 10.0)) == [0, 1]
    handle = group.work.remote(0.0)
    assert isinstance(handle, Handle)
    assert handle.ranks == [0, 1]
    assert handle.get(within=("rollout", 10.0)) == [0, 1]
    assert group.ping() == [group.processes[0].pid, group.processes[1].pid]


def test_declared_splits_and_reductions(group: WorkerGroup) -> None:
    rows = [10, 11, 12, 13, 14]
    assert group.tagged(rows, 1) == [(0, 11), (0, 12), (0, 13), (1, 14), (1, 15)]
    only = group.tagged.remote([7], PerRank([100, 200]))  # the second rank has no rows
    assert only.ranks == [0]
    assert only.get() == [(0, 107)]
    assert group.shares(0.5, within=("update", 10.0)) == {"share": 1.5, "rank": 1}
    assert group.first_rank.remote().ranks == [0]
    assert group.first_rank() == 0


def test_an_unknown_method_names_the_worker_class_and_its_methods(group: WorkerGroup) -> None:
    with pytest.raises(AttributeError) as info:
        group.updte(1)  # noqa: B018 - the attribute itself raises
    message = str(info.value)
    assert message.startswith("ToyWorker (worker group 'toy') has no method 'updte'; its methods:")
    for name in ("hang", "ping", "shares", "tagged", "work"):
        assert name in message


def test_a_hung_call_is_killed_at_its_deadline(group: WorkerGroup) -> None:
    pids = [group.processes[rank].pid for rank in range(2)]
    start = time.monotonic()
    with pytest.raises(StepTimeout) as info:
        group.hang(within=("rollout", 3.0))
    assert 3.0 <= time.monotonic() - start < 3.0 + 5.0
    killed = [f"toy worker {rank} (pid {pid})" for rank, pid in enumerate(pids)]
    assert str(info.value) == (
        f"rollout exceeded its deadline of 3 s (timeouts.rollout); killed {', '.join(killed)}"
    )
    assert info.value.step == "rollout"
    assert info.value.killed == killed
    assert not any(pid_alive(pid) for pid in pids)
    assert group.dead_ranks() == [0, 1]
    for rank in range(2):
        group.respawn(rank)
    group.wait_started(timeout=120)
    assert group.work(0.0, within=("rollout", 10.0)) == [0, 1]


def test_a_call_that_stops_answering_heartbeats_is_killed_before_its_deadline(
    group: WorkerGroup,
) -> None:
    pids = [group.processes[rank].pid for rank in range(2)]
    stuck = group.hold_gil.remote()
    start = time.monotonic()
    with pytest.raises(StepTimeout, match=r"^update: no heartbeat from toy worker \d"):
        stuck.get(within=("update", 60.0))
    assert time.monotonic() - start < LIVENESS.timeout_s + LIVENESS.interval_s + 3.0
    assert not all(pid_alive(pid) for pid in pids)
    for rank in range(2):
        group.respawn(rank)
    group.wait_started(timeout=120)
