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


#: The progress line's fields after the env steps: (metric, label, format), in order; a field
#: shows when its metric is in the iteration's metrics. ``rollout/steps_per_second`` shows
#: only without ``rollout/tokens_per_second`` (an LLM rollout reports both).
PROGRESS_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("env/episode_return_mean", "return", "{:.1f}"),
    ("env/success_rate", "success", "{:.2f}"),
    ("rollout/tokens_per_second", "", "{:.0f} tokens/s"),
    ("rollout/steps_per_second", "", "{:.0f} steps/s"),
    ("rollout/reward_mean", "reward", "{:.3f}"),
    ("eval/return_mean", "eval", "{:.1f}"),
    ("eval/success_rate", "eval success", "{:.2f}"),
    ("eval/accuracy", "accuracy", "{:.3f}"),
    ("eval/pairwise_accuracy", "pairwise accuracy", "{:.3f}"),
)


def log_progress(total: int, it: int, m: dict[str, float]) -> None:
    """One progress record per iteration (the CLI's progress display, or a line)."""
    parts = [f"env steps {int(m['env/total_steps'])}"]
    for key, label, fmt in PROGRESS_FIELDS:
        if key not in m or (key == "rollout/steps_per_second" and "rollout/tokens_per_second" in m):
            continue
        value = fmt.format(m[key])
        parts.append(f"{label} {value}" if label else value)
    parts.append(f"orch {1000 * m['time/orchestration']:.0f} ms")
    text = " | ".join(parts)
    progress_logger.info(
        "iter %d/%d | %s",
        it + 1,
        total,
        text,
        extra={PROGRESS_FIELD: {"iteration": it + 1, "total": total, "text": text}},
    )
