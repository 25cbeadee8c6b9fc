"""reward step: apply the configured reward function to the collected batch."""

from __future__ import annotations

from typing import Any

from prefect import task

from infra.session import get_session
from tasks.options import STEP_OPTIONS


@task(name="reward", task_run_name="reward-{iteration}", **STEP_OPTIONS)
def reward(session_id: str, iteration: int) -> dict[str, Any]:
    """Score the batch on the trainer (the env reward, scaled, for embodied runs)."""
    return get_session(session_id).runtime.reward()
