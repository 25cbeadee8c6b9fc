"""The run loop: an iteration flow that failed for good although its retry budget was not
used (the Prefect API dropped the retry) rebuilds dead workers and replays from the last
checkpoint, or runs the iteration again; a failure that used up the budget ends the run."""

from __future__ import annotations

import pytest

from flows.iteration import IterationResult
from flows.run_loop import _iterate
from infra.driver.faults import FaultInjector
from infra.driver.guard import IterationGuard
from infra.driver.session import RunState
from infra.driver.step_runtime import StepResult
from rl_core.config import load_config


class Runtime:
    groups: list = []

    def __init__(self, dead_after_failure: bool) -> None:
        self.dead_after_failure = dead_after_failure
        self.failed = False
        self.idle_from: int | None = None

    def idle_reason(self, iteration: int) -> str | None:
        return "idle" if self.idle_from is not None and iteration >= self.idle_from else None

    def repair(self) -> dict[str, list[int]]:
        return {"env": [0]} if self.failed and self.dead_after_failure else {}


class Session:
    def __init__(self, dead_after_failure: bool) -> None:
        self.id = "test"
        self.cfg = load_config(
            "ppo_cartpole", ["run.max_iterations=4", "eval.before_training=false"]
        )
        self.state = RunState()
        self.runtime = Runtime(dead_after_failure)
        self.faults = FaultInjector()
        self.guard = IterationGuard(self, max_rewinds=2)
        self.tracker = None
        self.fatal_error = None
        self.manifest = {"step": 4}
        self.resumed_from = None
        self.rewound_to: list[int] = []
        self.supervised = False
        self.store_uri = "unused"
        self.checkpoints: list[int] = []

    def checkpoint(self) -> None:
        self.checkpoints.append(self.state.iteration)
        self.manifest = {"step": self.state.iteration}

    def rewind(self) -> int:
        self.state = RunState(iteration=2, env_steps=200)  # the step-2 checkpoint
        self.rewound_to.append(2)
        return 2


class NoProgressArtifact:
    """The Prefect UI's progress bar is not under test (it needs a Prefect API)."""

    def __init__(self, *args: object) -> None:
        pass

    def update(self, done: int, force: bool = False) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_progress_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flows.run_loop.ProgressArtifact", NoProgressArtifact)


def flow_failing_at(fail_at: int, session: Session, ran: list[int], times: int = 1):
    """An iteration flow (one attempt: Prefect's retry is dropped) failing ``times`` times."""

    def step_flow(session_id: str, iteration: int) -> IterationResult:
        ran.append(iteration)
        session.guard.begin(iteration, attempt=1)
        if iteration == fail_at and ran.count(fail_at) <= times:
            session.runtime.failed = True
            raise RuntimeError("ActorDiedError: the env worker died")
        session.state.iteration = iteration + 1
        session.state.env_steps += 100
        steps = {"rollout": StepResult(0.01, {"rollout/steps_per_second": 1.0})}
        return IterationResult(steps=steps, body_started=0.0, body_ended=0.0)

    return step_flow


def test_a_failed_iteration_with_a_dead_worker_replays_from_the_checkpoint() -> None:
    session = Session(dead_after_failure=True)
    ran: list[int] = []
    result = _iterate(session, flow_failing_at(3, session, ran))
    assert ran == [0, 1, 2, 3, 2, 3]
    assert session.rewound_to == [2]
    assert result["iterations"] == 4


def test_a_failed_iteration_without_dead_workers_runs_again_within_its_budget() -> None:
    session = Session(dead_after_failure=False)
    ran: list[int] = []
    result = _iterate(session, flow_failing_at(3, session, ran, times=2))
    assert ran == [0, 1, 2, 3, 3, 3] and session.rewound_to == []
    assert result["iterations"] == 4


def test_a_failure_past_the_retry_budget_ends_the_run() -> None:
    session = Session(dead_after_failure=False)
    ran: list[int] = []
    with pytest.raises(RuntimeError, match="ActorDiedError"):
        _iterate(session, flow_failing_at(3, session, ran, times=3))
    assert ran == [0, 1, 2, 3, 3, 3] and session.rewound_to == []


def test_an_idle_runtime_stops_the_run_after_committing_what_it_trained() -> None:
    session = Session(dead_after_failure=False)
    session.manifest = None
    session.runtime.idle_from = 2  # e.g. an online run with two batches of feedback waiting
    ran: list[int] = []
    result = _iterate(session, flow_failing_at(-1, session, ran))
    assert ran == [0, 1]
    assert result["stopped"] == "idle" and result["iterations"] == 2
    assert session.checkpoints == [2]  # committed before stopping; the next start goes on
