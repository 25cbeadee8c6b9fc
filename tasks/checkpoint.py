"""checkpoint step: save all worker state, then commit the manifest."""

from __future__ import annotations

from prefect import task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import RETRYABLE_STEP_OPTIONS


@task(name="checkpoint", task_run_name="checkpoint-{iteration}", **RETRYABLE_STEP_OPTIONS)
def checkpoint(session_id: str, iteration: int) -> StepResult:
    """Write and commit a checkpoint of the completed iterations (idempotent)."""
    return get_session(session_id).checkpoint()
