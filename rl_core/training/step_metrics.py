"""Averaging the metrics of the gradient steps of one update."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def mean_step_metrics(
    step: Callable[[Any], dict[str, float]], minibatches: Iterable[Any]
) -> dict[str, float]:
    """Run ``step`` on each minibatch; each metric averaged over the steps that reported it.

    Args:
        step: One gradient step: ``step(minibatch) -> {metric: value}``.
        minibatches: The minibatches, in order.

    Returns:
        The mean of each metric, and ``train/gradient_steps``: how many steps ran.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    steps = 0
    for batch in minibatches:
        steps += 1
        for key, value in step(batch).items():
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    metrics = {key: sums[key] / counts[key] for key in sums}
    metrics["train/gradient_steps"] = float(steps)
    return metrics
