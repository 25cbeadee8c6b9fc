"""reward step: score the collected batch, fanning out over Ray tasks where the runtime asks.

Embodied runs apply the reward on the trainer's batch. Reasoning runs hand out chunks of
responses (``runtime.reward_jobs``) that ``score_rewards`` tasks score in parallel on the
Ray cluster; the ``reward`` task then collects them.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from infra.session import get_session
from infra.step_runtime import StepResult
from tasks.fanout import run_jobs
from tasks.options import STEP_OPTIONS


@task(name="reward", task_run_name="reward-{iteration}", **STEP_OPTIONS)
def reward(session_id: str, iteration: int, results: list[Any] | None = None) -> StepResult:
    """Apply the scores (reasoning) or the reward function (embodied) to the batch."""
    return get_session(session_id).runtime.reward(iteration, results)


def run_reward_step(session_id: str, iteration: int) -> StepResult:
    """Run the runtime's scoring jobs (if any) as parallel tasks, then the reward task."""
    session = get_session(session_id)
    jobs = session.runtime.reward_jobs(iteration)
    results = run_jobs(jobs, iteration, session.cfg.timeouts.reward, "reward")
    return reward(session_id, iteration, results)
