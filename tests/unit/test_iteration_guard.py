"""IterationGuard: completed steps are not rerun, stateful steps restore their snapshot,
dead workers rewind (counted against the retry budget)."""

import pytest

from infra.driver.faults import FaultInjector
from infra.driver.guard import IterationGuard, RewindLimitError, StoppedBeforeRetryError
from infra.driver.session import STOP_REQUESTED
from infra.driver.step_runtime import StepResult


class Runtime:
    def __init__(self):
        self.calls: list[str] = []
        self.dead: dict[str, list[int]] = {}

    def snapshot(self, step):
        self.calls.append(f"snapshot:{step}")

    def restore(self, step):
        self.calls.append(f"restore:{step}")

    def before_retry(self, step):
        self.calls.append(f"before_retry:{step}")

    def repair(self):
        dead, self.dead = self.dead, {}
        return dead


class Session:
    def __init__(self):
        self.runtime = Runtime()
        self.faults = FaultInjector()
        self.rewinds = 0

    def rewind(self):
        self.rewinds += 1
        return 4


def step(log, name, fail=False):
    def call():
        log.append(name)
        if fail:
            raise RuntimeError(name)
        return StepResult(0.5, {"test/value": 1.0}, info={"name": name})

    return call


def test_retry_resumes_at_the_first_incomplete_step():
    session = Session()
    guard = IterationGuard(session, max_rewinds=2)
    work: list[str] = []
    assert guard.begin(5, attempt=1) is None
    guard.run("weight_sync", step(work, "weight_sync"))
    guard.run("rollout", step(work, "rollout"))
    guard.run("update", step(work, "update"))
    with pytest.raises(RuntimeError):
        guard.run("evaluate", step(work, "evaluate", fail=True))
    # the iteration flow is retried: workers are alive
    assert guard.begin(5, attempt=2) is None
    first = guard.run("weight_sync", step(work, "weight_sync"))
    guard.run("rollout", step(work, "rollout"))
    guard.run("update", step(work, "update"))
    guard.run("evaluate", step(work, "evaluate"))
    assert work == ["weight_sync", "rollout", "update", "evaluate", "evaluate"]
    assert first.info["name"] == "weight_sync"  # the recorded result
    assert session.runtime.calls == [
        "snapshot:rollout",
        "snapshot:update",
        "before_retry:evaluate",
    ]


def test_stateful_step_restores_its_snapshot_before_a_retry():
    session = Session()
    guard = IterationGuard(session, max_rewinds=2)
    guard.begin(0, attempt=1)
    with pytest.raises(RuntimeError):
        guard.run("update", step([], "update", fail=True))
    guard.begin(0, attempt=2)
    result = guard.run("update", step([], "update"))
    assert session.runtime.calls == ["snapshot:update", "restore:update"]
    assert result.metrics["time/snapshot_update"] >= 0
    assert result.seconds == pytest.approx(0.5 + result.metrics["time/snapshot_update"])


def test_a_new_iteration_starts_a_new_journal():
    guard = IterationGuard(Session(), max_rewinds=2)
    work: list[str] = []
    guard.begin(0, attempt=1)
    guard.run("count", step(work, "count"))
    guard.begin(1, attempt=1)
    guard.run("count", step(work, "count"))
    assert work == ["count", "count"]


def test_dead_workers_rewind_within_the_budget():
    session = Session()
    guard = IterationGuard(session, max_rewinds=2)
    for _ in range(2):
        guard.begin(7, attempt=1)
        session.runtime.dead = {"actor": [0]}
        assert guard.begin(7, attempt=2) == 4  # rewound to the checkpoint's step
    guard.begin(7, attempt=1)
    session.runtime.dead = {"env": [0]}
    with pytest.raises(RewindLimitError, match="iteration 7: workers died 3 times"):
        guard.begin(7, attempt=2)
    assert session.rewinds == 2


def test_an_iteration_that_failed_for_good_rewinds_only_if_workers_died():
    session = Session()
    guard = IterationGuard(session, max_rewinds=1)
    guard.begin(3, attempt=1)
    assert guard.recover(3) is None  # nothing died: the failure stands
    assert session.rewinds == 0
    session.runtime.dead = {"env": [0]}
    assert guard.recover(3) == 4  # rebuilt and rewound to the checkpoint's step
    session.runtime.dead = {"env": [0]}
    with pytest.raises(RewindLimitError, match="iteration 3: workers died 2 times"):
        guard.recover(3)  # the same budget as the iteration flow's retries


def test_after_a_stop_request_a_retry_rebuilds_nothing_and_fails_at_once():
    """The signal that asked for the stop may have stopped the workers (Prefect signals a
    deployment run's process group, local Ray cluster included): no respawn, no hang."""
    session = Session()
    session.runtime.dead = {"env": [0]}
    guard = IterationGuard(session, max_rewinds=2)
    assert guard.begin(3, attempt=1) is None
    STOP_REQUESTED.set()
    try:
        with pytest.raises(StoppedBeforeRetryError, match="iteration 3: a stop was requested"):
            guard.begin(3, attempt=2)
    finally:
        STOP_REQUESTED.clear()
    assert session.runtime.dead == {"env": [0]} and session.rewinds == 0  # not repaired
