"""evaluate step, per model category.

Embodied: deterministic episodes fanned out as Ray tasks through the task runner.
Reasoning: greedy accuracy and pass@k on the held-out prompts by the rollout workers, with
a table of sample completions logged to MLflow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from prefect import task
from prefect_ray.context import remote_options

from infra.evaluation import eval_seeds, run_episodes
from tasks.options import STEP_OPTIONS


@task(name="eval_episodes", task_run_name="eval_episodes-{iteration}-{part}", **STEP_OPTIONS)
def eval_episodes(
    config: dict[str, Any], weights: Any, seeds: list[int], iteration: int, part: int
) -> dict[str, Any]:
    """Play the episodes of ``seeds`` with the given weights (runs on a Ray worker)."""
    return run_episodes(config, weights, seeds)


def submit_evaluation(
    config: dict[str, Any], weights_ref: Any, iteration: int, num_episodes: int, num_tasks: int
) -> list[Any]:
    """Submit the evaluation episodes as ``num_tasks`` parallel task runs; returns futures."""
    seeds = eval_seeds(int(config["run"]["seed"]), num_episodes)
    parts = [list(p) for p in np.array_split(seeds, min(num_tasks, num_episodes))]
    # Worker groups hold the CPU reservations; evaluation tasks share those CPUs.
    with remote_options(num_cpus=0):
        return [
            eval_episodes.submit(config, weights_ref, [int(s) for s in p], iteration, i)
            for i, p in enumerate(parts)
        ]


def gather_evaluation(futures: list[Any], started: float) -> dict[str, Any]:
    """Combine the results of :func:`submit_evaluation`'s futures into eval metrics."""
    results = [f.result() for f in futures]
    returns = [r for res in results for r in res["returns"]]
    lengths = [n for res in results for n in res["lengths"]]
    return {
        "seconds": max(res["seconds"] for res in results),
        "wall_seconds": time.perf_counter() - started,
        "eval/return_mean": float(np.mean(returns)),
        "eval/return_std": float(np.std(returns)),
        "eval/return_min": float(np.min(returns)),
        "eval/length_mean": float(np.mean(lengths)),
        "eval/episodes": len(returns),
    }


def evaluate_embodied(session: Any, iteration: int) -> dict[str, Any]:
    """Submit and gather the embodied evaluation tasks."""
    started = time.perf_counter()
    cfg = session.cfg
    futures = submit_evaluation(
        session.runtime.config_dict,
        session.runtime.policy_weights_ref(),
        iteration,
        cfg.eval.num_episodes,
        cfg.eval.num_tasks,
    )
    return gather_evaluation(futures, started)


@task(name="llm_evaluate", task_run_name="llm_evaluate-{iteration}", **STEP_OPTIONS)
def llm_evaluate(session_id: str, iteration: int) -> dict[str, Any]:
    """Held-out accuracy and pass@k; sample completions go to MLflow as a table."""
    from infra.session import get_session

    session = get_session(session_id)
    metrics, rows = session.runtime.evaluate(iteration)
    if session.tracker and rows:
        session.tracker.log_table(rows, f"eval/samples_{iteration + 1:06d}.json")
    return metrics


def evaluate_reasoning(session: Any, iteration: int) -> dict[str, Any]:
    """Run the reasoning evaluation task."""
    return llm_evaluate(session.id, iteration)


#: Evaluation per model category (``cfg.category``).
EVALUATIONS: dict[str, Callable[[Any, int], dict[str, Any]]] = {
    "embodied": evaluate_embodied,
    "reasoning": evaluate_reasoning,
}


def run_evaluation(session: Any, iteration: int) -> dict[str, Any]:
    """The evaluate step of ``session``'s model category."""
    return EVALUATIONS[session.cfg.category](session, iteration)
