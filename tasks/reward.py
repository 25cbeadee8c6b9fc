"""reward step: score the collected batch, fanning out over Ray tasks where the runtime asks.

Embodied runs apply the reward on the trainer's batch. Reasoning runs hand out chunks of
responses (``runtime.reward_jobs()``) that ``score_rewards`` tasks score in parallel on the
Ray cluster (the iteration flow's ``RayTaskRunner``); the ``reward`` task then collects them.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect_ray.context import remote_options

from infra.llm.reward_scoring import score_chunk
from infra.session import get_session
from tasks.options import STEP_OPTIONS


@task(name="score_rewards", task_run_name="score_rewards-{iteration}-{part}", **STEP_OPTIONS)
def score_rewards(job: dict[str, Any], iteration: int, part: int) -> list[float]:
    """Score one chunk of responses (runs on a Ray worker)."""
    return score_chunk(job["reward_cfg"], job["chunk"])


@task(name="reward", task_run_name="reward-{iteration}", **STEP_OPTIONS)
def reward(
    session_id: str, iteration: int, results: list[list[float]] | None = None
) -> dict[str, Any]:
    """Apply the scores (reasoning) or the reward function (embodied) to the batch."""
    return get_session(session_id).runtime.reward(results)


def run_reward_step(session_id: str, iteration: int) -> dict[str, Any]:
    """Submit the runtime's scoring jobs (if any) as parallel tasks, then the reward task."""
    jobs = get_session(session_id).runtime.reward_jobs()
    with remote_options(num_cpus=0):  # worker groups hold the CPU reservations
        futures = [score_rewards.submit(job, iteration, i) for i, job in enumerate(jobs)]
    return reward(session_id, iteration, [f.result() for f in futures] if jobs else None)
