"""The iteration flow: one training iteration as a child flow run named ``iteration-<k>``.

Its steps run through the session's :class:`~infra.driver.guard.IterationGuard`, so
a retried iteration (a failed task, a hung or dead worker) resumes at the first step that
did not complete and no step's effect is applied twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prefect import flow
from prefect.context import TagsContext
from prefect.runtime import flow_run
from prefect.states import Cancelled
from prefect_ray import RayTaskRunner

from flows.stop_signals import stop_signals_in_flow
from infra.checkpoint.storage_full import CheckpointStorageFull
from infra.driver.faults import RunAbortedByFault
from infra.driver.guard import ITERATION_RETRIES, RewindLimitError
from infra.driver.session import TrainSession, get_session
from infra.driver.step_runtime import StepResult
from rl_core.llm.sync_probe import SyncProbeError
from rl_core.steps import Step
from rl_core.training.nonfinite import SkippedUpdatesError
from tasks.checkpoint import checkpoint
from tasks.evaluate import run_evaluation
from tasks.reward import run_reward_step
from tasks.steps import step_task
from tasks.video import add_video, video_due

logger = logging.getLogger("rlpipe.iteration")


#: Errors that end the run at once: a retry of the iteration would fail the same way (or,
#: after a rewind was refused, continue from rebuilt blank workers).
FATAL_ERRORS = (
    RunAbortedByFault,
    RewindLimitError,
    SkippedUpdatesError,
    CheckpointStorageFull,
    SyncProbeError,
)


@dataclass
class IterationResult:
    """What an iteration flow returns to the run loop.

    Attributes:
        steps: Each step that ran (or completed in an earlier attempt), by name.
        solved: ``run.stop_at_eval_return`` or ``run.stop_at_eval_success`` was reached.
        body_started: ``perf_counter`` when the flow's body started (orchestration timing).
        body_ended: ``perf_counter`` when it ended.
        rewound_to: Set when workers were rebuilt: the iteration the run replays from.
    """

    steps: dict[str, StepResult] = field(default_factory=dict)
    solved: bool = False
    body_started: float = 0.0
    body_ended: float = 0.0
    rewound_to: int | None = None


@contextmanager
def untagged_task_runs() -> Iterator[None]:
    """Task runs started in the block do not inherit the run's tags.

    The tags stay on the flow runs (the UI filters runs by them). A task run with tags asks
    the API for tag concurrency slots before it starts, one round trip per task; the steps
    of an iteration must not wait on a tag limit, so they carry none.
    """
    with TagsContext(current_tags=set()):
        yield


@contextmanager
def child_flow_body() -> Iterator[None]:
    """The body of a flow that the train or SFT flow runs as a child.

    SIGINT and SIGTERM keep requesting a stop after the iteration (the engine of each child
    flow run installs Prefect's own SIGTERM handler, which would end the run at once; a
    signal in the engine's few milliseconds around the body reaches the run loop as
    ``TerminationSignal``, see ``flows.run_loop``), and task runs carry no tags
    (:func:`untagged_task_runs`).
    """
    with stop_signals_in_flow(), untagged_task_runs():
        yield


def root_cause(exc: BaseException) -> BaseException:
    """The exception a Ray worker raised (instead of Ray's wrapper with its traceback)."""
    cause = getattr(exc, "cause", None)  # RayTaskError (duck-typed: Ray may rebuild classes)
    return cause if isinstance(cause, BaseException) else exc


def _due(iteration: int, interval: int, last: bool) -> bool:
    return last or (interval > 0 and (iteration + 1) % interval == 0)


#: Options of the child flows a train flow runs (a retry resumes at the failed step).
CHILD_FLOW_OPTIONS: dict[str, Any] = {
    "persist_result": False,
    "retries": ITERATION_RETRIES,
    "retry_delay_seconds": 0,
    "log_prints": False,
    "validate_parameters": False,
}


@flow(
    name="iteration",
    flow_run_name="iteration-{iteration}",
    task_runner=RayTaskRunner(),
    **CHILD_FLOW_OPTIONS,
)
def iteration_flow(session_id: str, iteration: int) -> IterationResult:
    """Run weight_sync → rollout → reward → advantage → update → [evaluate] → [checkpoint].

    On a retry, completed steps are skipped; if a worker holding state died, the run
    rewinds to its last checkpoint and the result's ``rewound_to`` says where.

    Returns:
        Each step's result (metrics and worker seconds) and the iteration's timing.
    """
    with child_flow_body():
        return _run_iteration(session_id, iteration)


def _run_iteration(session_id: str, iteration: int) -> IterationResult:
    body_started = time.perf_counter()
    session = get_session(session_id)
    guard = session.guard
    steps: dict[str, StepResult] = {}
    try:
        rewound = guard.begin(iteration, flow_run.run_count or 1)
        if rewound is not None:
            return IterationResult(rewound_to=rewound)
        for step in (Step.WEIGHT_SYNC, Step.ROLLOUT, Step.REWARD, Step.ADVANTAGE, Step.UPDATE):
            steps[step] = guard.run(step, _step_call(step, session_id, iteration))
        return finish_iteration(session, iteration, steps, body_started)
    except FATAL_ERRORS as exc:  # retrying cannot help: the train flow fails with it
        cause = root_cause(exc)
        session.fatal_error = cause  # raised again by the train loop
        # Cancelled: a final state that Prefect does not retry (Failed would be retried)
        return Cancelled(message=f"{type(cause).__name__}: {cause}")


def _step_call(step: Step, session_id: str, iteration: int) -> Callable[[], StepResult]:
    """What the guard calls to run ``step`` of ``iteration`` (its Prefect task)."""
    if step is Step.REWARD:
        return lambda: run_reward_step(session_id, iteration)
    return lambda: step_task(step)(session_id, iteration)


@flow(
    name="evaluate-before-training",
    flow_run_name="evaluate-before-training",
    task_runner=RayTaskRunner(),
    **CHILD_FLOW_OPTIONS,
)
def baseline_evaluation_flow(session_id: str) -> StepResult:
    """Evaluate the starting weights (``eval.before_training``); records the result.

    Returns:
        The evaluate step's result (``eval/*`` metrics and worker seconds).
    """
    session = get_session(session_id)
    with child_flow_body():
        result = run_evaluation(session, -1)
    session.state.initial_eval_return = result.metrics["eval/return_mean"]
    return result


def finish_iteration(
    session: TrainSession,
    iteration: int,
    steps: dict[str, StepResult],
    body_started: float,
) -> IterationResult:
    """Count the iteration (once), evaluate and checkpoint when due; the flow's result.

    A checkpoint is due every ``run.checkpoint_interval`` iterations, at the end, when the
    run is solved, and (``run.checkpoint_best``) after an evaluation that beat every
    earlier one.

    The env steps counted are those the steps so far collected (the rollout's, or the
    supervised step's samples).
    """
    cfg, guard = session.cfg, session.guard
    env_steps = sum(result.env_steps for result in steps.values())
    last = iteration + 1 >= cfg.run.max_iterations
    guard.run("count", lambda: _count(session.state, iteration, env_steps))
    if _due(iteration, cfg.run.eval_interval, last):
        steps[Step.EVALUATE] = guard.run(Step.EVALUATE, lambda: _evaluate(session, iteration, last))
    state = session.state
    new_best = cfg.run.checkpoint_best and state.best_eval_step == iteration + 1
    if _due(iteration, cfg.run.checkpoint_interval, last) or state.solved or new_best:
        steps[Step.CHECKPOINT] = guard.run(
            Step.CHECKPOINT, lambda: checkpoint(session.id, iteration)
        )
    return IterationResult(steps, session.state.solved, body_started, time.perf_counter())


def _count(state: Any, iteration: int, env_steps: int) -> dict[str, Any]:
    state.iteration = iteration + 1
    state.env_steps += int(env_steps)
    return {"iteration": state.iteration, "env_steps": state.env_steps}


def reached(target: float | None, value: float | None) -> bool:
    """Whether an evaluation's ``value`` reached a stopping ``target`` (None: no target)."""
    return target is not None and value is not None and value >= target


def _evaluate(session: TrainSession, iteration: int, last: bool) -> StepResult:
    """The evaluate step, its effect on the run's counters, and the video when due."""
    result = run_evaluation(session, iteration)
    state, cfg = session.state, session.cfg
    ret = result.metrics["eval/return_mean"]
    state.last_eval_return = ret
    if state.best_eval_return is None or ret > state.best_eval_return:
        state.best_eval_return = ret
        state.best_eval_step = iteration + 1  # the step of the checkpoint of these weights
    state.solved = reached(cfg.run.stop_at_eval_return, ret) or reached(
        cfg.run.stop_at_eval_success, result.metrics.get("eval/success_rate")
    )
    if video_due(cfg, iteration, final=last or state.solved):
        add_video(session, iteration, result)
    return result
