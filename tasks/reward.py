"""reward step: score the collected batch, in the reward task or fanned out over Ray tasks.

Embodied runs apply the reward on the trainer's batch. Reasoning runs hand out chunks of
responses (``runtime.reward_jobs``). A fan-out task costs about 0.4 s of overhead on a
2-CPU machine (docs/performance.md) while scoring a small batch takes milliseconds, so the
``reward`` task scores the chunks itself until scoring one batch takes
``reward.fanout_min_seconds`` or longer; from then on the run fans them out to
``score_rewards`` tasks on the Ray cluster. Scores are the same either way.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prefect import task

from infra.driver.session import TrainSession, get_session
from infra.driver.step_runtime import FanoutJob, StepResult
from rl_core.steps import Step
from tasks.fanout import run_job, run_jobs_timed
from tasks.options import STEP_OPTIONS

logger = logging.getLogger(__name__)


@task(name="reward", task_run_name="reward-{iteration}", **STEP_OPTIONS)
def reward(
    session_id: str,
    iteration: int,
    results: list[Any] | None = None,
    jobs: list[FanoutJob] | None = None,
    scoring: float = 0.0,
) -> StepResult:
    """Apply the scores (reasoning) or the reward function (embodied) to the batch.

    Args:
        session_id: The run's session.
        iteration: Iteration index.
        results: Scores of the fan-out tasks, in job order.
        jobs: Scoring jobs to run in this task first (their scores replace ``results``).
        scoring: Seconds the fan-out tasks spent scoring (the longest one's), counted as
            the step's compute.
    """
    session = get_session(session_id)
    if jobs:
        start = time.perf_counter()
        results = [run_job(job, iteration, part) for part, job in enumerate(jobs)]
        scoring = time.perf_counter() - start
        note_scoring_time(session, scoring)
    result = session.runtime.reward(iteration, results)
    result.seconds += scoring
    return result


def note_scoring_time(session: TrainSession, seconds: float) -> None:
    """Switch the run to fan-out scoring once scoring a batch here took long enough."""
    threshold = session.cfg.reward.fanout_min_seconds
    if seconds >= threshold and not session.fanout_scoring:
        logger.info(
            "scoring a batch took %.2f s (reward.fanout_min_seconds = %g): the next batches "
            "are scored by %d parallel tasks",
            seconds,
            threshold,
            session.cfg.reward.num_tasks,
        )
        session.fanout_scoring = True


def should_fan_out(session: TrainSession, jobs: list[FanoutJob]) -> bool:
    """Whether ``jobs`` run as parallel Ray tasks (else the reward task scores them)."""
    # an injected fault meant for a scoring task must hit a Ray worker, not this process
    return session.fanout_scoring or any(job.fault for job in jobs)


def run_reward_step(session_id: str, iteration: int) -> StepResult:
    """Score the batch (in the reward task, or as parallel tasks), then apply the scores.

    The step's injected fault is armed once its jobs are built (``StepRuntime.fanout_jobs``).
    """
    session = get_session(session_id)
    jobs = session.runtime.fanout_jobs(Step.REWARD, iteration)
    if jobs and not should_fan_out(session, jobs):
        return reward(session_id, iteration, jobs=jobs)
    results, scoring = run_jobs_timed(jobs, iteration, session.cfg.timeouts.reward, "reward")
    return reward(session_id, iteration, results, scoring=scoring)
