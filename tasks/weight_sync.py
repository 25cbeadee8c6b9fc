"""weight_sync step: trainer → rollout workers, with a version number."""

from __future__ import annotations

from prefect import task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import RETRYABLE_STEP_OPTIONS


@task(name="weight_sync", task_run_name="weight_sync-{iteration}", **RETRYABLE_STEP_OPTIONS)
def weight_sync(session_id: str, iteration: int) -> StepResult:
    """Push the trainer's current weights to every rollout worker."""
    return get_session(session_id).runtime.weight_sync(iteration)
