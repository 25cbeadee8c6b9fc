"""update step: one policy update (epochs of minibatches) on the trainer."""

from __future__ import annotations

from prefect import task

from infra.driver.session import get_session
from infra.driver.step_runtime import StepResult
from tasks.options import STEP_OPTIONS


@task(name="update", task_run_name="update-{iteration}", **STEP_OPTIONS)
def update(session_id: str, iteration: int) -> StepResult:
    """Update the policy; not retried (it changes the trainer's state)."""
    return get_session(session_id).runtime.update(iteration)
