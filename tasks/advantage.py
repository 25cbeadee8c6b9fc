"""advantage step: advantages and returns on the trainer."""

from __future__ import annotations

from typing import Any

from prefect import task

from infra.session import get_session
from tasks.options import STEP_OPTIONS


@task(name="advantage", task_run_name="advantage-{iteration}", **STEP_OPTIONS)
def advantage(session_id: str, iteration: int) -> dict[str, Any]:
    """Compute advantages with the configured estimator."""
    return get_session(session_id).runtime.advantage(iteration)
