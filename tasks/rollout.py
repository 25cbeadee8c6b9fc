"""rollout step: env workers step their envs with actions from rollout workers."""

from __future__ import annotations

from prefect import task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import STEP_OPTIONS


@task(name="rollout", task_run_name="rollout-{iteration}", **STEP_OPTIONS)
def rollout(session_id: str, iteration: int) -> StepResult:
    """Collect one iteration of experience; the batch goes to the trainer through Ray."""
    return get_session(session_id).runtime.rollout(iteration)
