"""advantage step: advantages and returns on the trainer."""

from __future__ import annotations

from prefect import task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import STEP_OPTIONS


@task(name="advantage", task_run_name="advantage-{iteration}", **STEP_OPTIONS)
def advantage(session_id: str, iteration: int) -> StepResult:
    """Compute advantages with the configured estimator."""
    return get_session(session_id).runtime.advantage(iteration)
