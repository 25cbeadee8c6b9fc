"""checkpoint step: save all worker state, then commit the manifest."""

from __future__ import annotations

from typing import Any

from prefect import task

from infra.checkpoint.storage_full import CheckpointStorageFull
from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import RETRYABLE_STEP_OPTIONS


def retry_unless_storage_full(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition: a full store fails the same way until space is freed."""
    error = state.result(raise_on_failure=False)
    return not isinstance(error, CheckpointStorageFull)


@task(
    name="checkpoint",
    task_run_name="checkpoint-{iteration}",
    retry_condition_fn=retry_unless_storage_full,
    **RETRYABLE_STEP_OPTIONS,
)
def checkpoint(session_id: str, iteration: int) -> StepResult:
    """Write and commit a checkpoint of the completed iterations (idempotent)."""
    return get_session(session_id).checkpoint()
