"""evaluate step: deterministic episodes fanned out as Ray tasks through the task runner."""

from __future__ import annotations

import time
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
