"""The steps that are one call of the run's runtime, each a Prefect task named after it.

``weight_sync``, ``rollout``, ``advantage``, ``update`` and ``sft_update``: the task
``<step>`` (runs named ``<step>-<iteration>``) calls ``StepRuntime.run_step``, which arms
the step's injected fault (``RLPIPE_FAULTS``) before the step's work starts. A step that is
safe to repeat retries on its own (``RETRYABLE_STEP_OPTIONS``); the others are retried by
their iteration flow, which resumes at the first step that did not complete.
"""

from __future__ import annotations

from collections.abc import Callable

from prefect import Task, task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from rl_core.steps import Step
from tasks.options import RETRYABLE_STEP_OPTIONS, STEP_OPTIONS

#: Steps whose work is one call of the runtime (reward, evaluate and checkpoint have tasks
#: of their own: fan-out jobs, the session's checkpoint).
RUNTIME_STEPS: tuple[Step, ...] = (
    Step.WEIGHT_SYNC,
    Step.ROLLOUT,
    Step.ADVANTAGE,
    Step.UPDATE,
    Step.SFT_UPDATE,
)


def _step_function(step: Step) -> Callable[[str, int], StepResult]:
    """The body of ``step``'s task, named (and described) as the step."""

    def run(session_id: str, iteration: int) -> StepResult:
        return get_session(session_id).runtime.run_step(step, iteration)

    run.__name__ = run.__qualname__ = step.value  # the task key's name part
    run.__doc__ = step.summary
    return run


def _step_task(step: Step) -> Task:
    options = RETRYABLE_STEP_OPTIONS if step.retry_safe else STEP_OPTIONS
    return task(
        _step_function(step),
        name=step.value,
        task_run_name=f"{step.value}-{{iteration}}",
        **options,
    )


_TASKS: dict[Step, Task] = {step: _step_task(step) for step in RUNTIME_STEPS}


def step_task(step: Step) -> Task:
    """The Prefect task of ``step``: called with ``(session_id, iteration)``.

    Raises:
        KeyError: ``step`` is not one of :data:`RUNTIME_STEPS`.
    """
    return _TASKS[Step(step)]
