"""Learning-rate schedules as pure functions of the iteration."""

from __future__ import annotations

import math
from collections.abc import Callable

from rl_core.registry import Registry

#: ``actor.lr_schedule`` → the fraction of the peak learning rate at a progress in [0, 1]
#: through the iterations after warm-up.
LR_SCHEDULES: Registry[Callable[[float], float]] = Registry("lr schedule")
LR_SCHEDULES.register("constant", lambda progress: 1.0)
LR_SCHEDULES.register("linear", lambda progress: 1.0 - progress)
LR_SCHEDULES.register("cosine", lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)))


def lr_at(
    base_lr: float, iteration: int, max_iterations: int, schedule: str, warmup: int = 0
) -> float:
    """Learning rate for a 0-based ``iteration``.

    Args:
        base_lr: Peak learning rate.
        iteration: Current iteration (0-based).
        max_iterations: Total iterations of the run.
        schedule: A name of :data:`LR_SCHEDULES`: ``constant``, ``linear`` (to 0 at the
            end) or ``cosine`` (to 0).
        warmup: Linear warm-up iterations from ``base_lr / warmup`` to ``base_lr``.

    Raises:
        ValueError: ``schedule`` is not registered (after the warm-up iterations).
    """
    if warmup and iteration < warmup:
        return base_lr * (iteration + 1) / warmup
    if schedule not in LR_SCHEDULES:
        allowed = ", ".join(LR_SCHEDULES.names(in_registration_order=True))
        raise ValueError(f"unknown lr schedule {schedule!r}; allowed: {allowed}")
    span = max(1, max_iterations - warmup)
    progress = min(1.0, (iteration - warmup) / span)
    return base_lr * LR_SCHEDULES.get(schedule)(progress)
