"""evaluate step: the runtime's evaluation jobs fan out as tasks, then the ``evaluate`` task.

Embodied runs: deterministic episodes (``eval_episodes`` tasks on Ray workers). Reasoning
runs: greedy accuracy and pass@k on the held-out prompts by the rollout workers, with a
table of sample completions logged to MLflow.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import task

from infra.driver.session import TrainSession, get_session
from infra.driver.step_runtime import StepResult
from rl_core.steps import Step
from tasks.fanout import run_jobs
from tasks.options import STEP_OPTIONS


@task(name="evaluate", task_run_name="evaluate-{iteration}", **STEP_OPTIONS)
def evaluate(session_id: str, iteration: int, results: list[Any] | None = None) -> StepResult:
    """Evaluation metrics of the current weights; sample rows go to MLflow as a table."""
    session = get_session(session_id)
    evaluation = session.runtime.evaluate(iteration, results)
    if "eval/return_mean" not in evaluation.metrics:
        raise TypeError(
            f"{type(session.runtime).__name__}.evaluate returned no 'eval/return_mean' metric "
            f"(it returned {sorted(evaluation.metrics)})"
        )
    if session.tracker and evaluation.rows:
        session.tracker.log_table(evaluation.rows, f"eval/samples_{iteration + 1:06d}.json")
    return StepResult(evaluation.seconds, dict(evaluation.metrics))


def run_evaluation(session: TrainSession, iteration: int) -> StepResult:
    """The evaluate step: fan-out jobs (if any), then the ``evaluate`` task.

    The step's injected fault is armed once its jobs are built, before any of them runs
    (``StepRuntime.fanout_jobs``).

    Returns:
        The step's result; ``info["wall_seconds"]`` is the step's wall-clock time.
    """
    started = time.perf_counter()
    jobs = session.runtime.fanout_jobs(Step.EVALUATE, iteration)
    results = run_jobs(jobs, iteration, session.cfg.timeouts.evaluate, "evaluate")
    result = evaluate(session.id, iteration, results)
    result.info["wall_seconds"] = time.perf_counter() - started
    return result
