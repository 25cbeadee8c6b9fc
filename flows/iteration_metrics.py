"""What one iteration of the train flow reports: its metrics, timing and progress line."""

from __future__ import annotations

import logging

from flows.iteration import IterationResult
from flows.terminal import PROGRESS_FIELD, PROGRESS_LOGGER
from infra.driver.step_runtime import StepResult
from rl_core.steps import Step

progress_logger = logging.getLogger(PROGRESS_LOGGER)


def step_metrics(steps: dict[str, StepResult], env_steps: int) -> dict[str, float]:
    """The steps' metrics in one dict, with ``time/<step>`` worker seconds."""
    metrics: dict[str, float] = {}
    compute = 0.0
    for name in Step:
        if name not in steps:
            continue
        seconds = float(steps[name].seconds)
        metrics[f"time/{name}"] = seconds
        compute += seconds
        metrics.update(steps[name].metrics)
    metrics["time/compute"] = compute
    metrics["env/total_steps"] = float(env_steps)
    return metrics


def timing_metrics(
    result: IterationResult, started: float, ended: float, compute: float
) -> dict[str, float]:
    """Iteration wall time and where its orchestration went.

    ``time/orchestration`` is everything but worker compute: the child flow's start (API
    calls) and end, the task engine between steps, and queuing the MLflow metrics.
    """
    wall = ended - started
    orchestration = max(0.0, wall - compute)
    return {
        "time/iteration": wall,
        "time/orchestration": orchestration,
        "time/orchestration_ratio": orchestration / max(wall, 1e-9),
        "time/orch_flow_start": result.body_started - started,
        "time/orch_tasks": result.body_ended - result.body_started - compute,
        "time/orch_flow_end_and_tracking": ended - result.body_ended,
    }


def log_progress(total: int, it: int, m: dict[str, float]) -> None:
    """One progress record per iteration (the CLI's progress display, or a line)."""
    parts = [f"env steps {int(m['env/total_steps'])}"]
    if "env/episode_return_mean" in m:
        parts.append(f"return {m['env/episode_return_mean']:.1f}")
    if "rollout/tokens_per_second" in m:
        parts.append(f"{m['rollout/tokens_per_second']:.0f} tokens/s")
    elif "rollout/steps_per_second" in m:
        parts.append(f"{m['rollout/steps_per_second']:.0f} steps/s")
    if "rollout/reward_mean" in m:
        parts.append(f"reward {m['rollout/reward_mean']:.3f}")
    if "eval/return_mean" in m:
        parts.append(f"eval {m['eval/return_mean']:.1f}")
    if "eval/accuracy" in m:
        parts.append(f"accuracy {m['eval/accuracy']:.3f}")
    if "eval/pairwise_accuracy" in m:
        parts.append(f"pairwise accuracy {m['eval/pairwise_accuracy']:.3f}")
    parts.append(f"orch {1000 * m['time/orchestration']:.0f} ms")
    text = " | ".join(parts)
    progress_logger.info(
        "iter %d/%d | %s",
        it + 1,
        total,
        text,
        extra={PROGRESS_FIELD: {"iteration": it + 1, "total": total, "text": text}},
    )
