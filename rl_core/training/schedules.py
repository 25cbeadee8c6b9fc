"""Learning-rate schedules as pure functions of the iteration."""

from __future__ import annotations

import math


def lr_at(
    base_lr: float, iteration: int, max_iterations: int, schedule: str, warmup: int = 0
) -> float:
    """Learning rate for a 0-based ``iteration``.

    Args:
        base_lr: Peak learning rate.
        iteration: Current iteration (0-based).
        max_iterations: Total iterations of the run.
        schedule: ``constant``, ``linear`` (to 0 at the end) or ``cosine`` (to 0).
        warmup: Linear warm-up iterations from ``base_lr / warmup`` to ``base_lr``.
    """
    if warmup and iteration < warmup:
        return base_lr * (iteration + 1) / warmup
    if schedule == "constant":
        return base_lr
    span = max(1, max_iterations - warmup)
    progress = min(1.0, (iteration - warmup) / span)
    if schedule == "linear":
        return base_lr * (1.0 - progress)
    if schedule == "cosine":
        return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr schedule {schedule!r}; allowed: constant, linear, cosine")
