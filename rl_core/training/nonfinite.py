"""Non-finite numbers in training: skip such an update, stop after a streak, find bad weights.

A minibatch whose loss or gradient norm is inf or NaN would write NaN into every weight and
into the optimizer's moments. The trainers ask :class:`SkippedUpdateGuard` before each
``optimizer.step()``: a non-finite update is skipped (gradients dropped, optimizer state and
weights untouched) and counted; ``actor.max_skipped_updates_in_a_row`` skipped in a row stop
the run. Data-parallel ranks agree on the decision (:func:`any_rank`), so they never
diverge or wait on each other in a collective.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)


class SkippedUpdatesError(RuntimeError):
    """Too many optimizer updates in a row had a non-finite loss or gradient norm."""


class SkippedUpdateGuard:
    """Decides whether an optimizer update may be applied; counts the skipped ones.

    The streak lives as long as the trainer (it spans iterations), and is saved with the
    trainer's checkpoint so a resumed run stops where an uninterrupted one would.

    Args:
        max_in_a_row: Skipped updates in a row that stop the run (``>= 1``).
        in_a_row: Skipped updates in a row so far (from a checkpoint).
    """

    def __init__(self, max_in_a_row: int, in_a_row: int = 0) -> None:
        if max_in_a_row < 1:
            raise ValueError(f"max_in_a_row must be >= 1, got {max_in_a_row}")
        self.max_in_a_row = max_in_a_row
        self.in_a_row = in_a_row

    def allow_step(self, finite: bool, iteration: int | None, lr: float, where: str = "") -> bool:
        """Record one update; True if it may be applied.

        Args:
            finite: Whether the update's loss and gradient norm are finite (on every rank).
            iteration: Training iteration, for the messages (None: unknown).
            lr: The learning rate in use, for the messages.
            where: Position inside the iteration (``epoch 1, minibatch 3``), for the messages.

        Raises:
            SkippedUpdatesError: This is the ``max_in_a_row``-th skipped update in a row.
        """
        if finite:
            self.in_a_row = 0
            return True
        self.in_a_row += 1
        at = f"iteration {iteration}" if iteration is not None else "this update"
        at = f"{at} ({where})" if where else at
        if self.in_a_row >= self.max_in_a_row:
            raise SkippedUpdatesError(
                f"{self.in_a_row} optimizer updates in a row had a non-finite loss or gradient "
                f"norm (the last at {at}); training has diverged: lower actor.lr (now {lr:g}), "
                "set actor.max_grad_norm, or check the rewards and advantages for inf/NaN"
            )
        logger.warning(
            "skipped an optimizer update at %s: non-finite loss or gradient norm "
            "(%d in a row; the run stops at %d)",
            at,
            self.in_a_row,
            self.max_in_a_row,
        )
        return False


def all_finite(values: Iterable[float]) -> bool:
    """Whether every value is a finite float."""
    return all(math.isfinite(v) for v in values)


def any_rank(flag: bool, device: torch.device | str = "cpu", world_size: int = 1) -> bool:
    """``flag`` OR-ed over the data-parallel ranks (an all-reduce when ranks exist).

    Every rank must call it at the same point (a collective) when ``world_size > 1`` and a
    process group is initialized; otherwise it returns ``flag``.
    """
    if world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def nonfinite_tensors(named: Iterable[tuple[str, torch.Tensor]]) -> list[str]:
    """Names of the floating tensors holding an inf or NaN.

    A sharded tensor (FSDP2 ``DTensor``) is checked on this rank's local shard; combine the
    ranks' answers with :func:`any_rank`. Entries that are not tensors (megatron's
    ``_extra_state``) are skipped.
    """
    bad = []
    for name, tensor in named:
        if not isinstance(tensor, torch.Tensor):
            continue
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        if local.is_floating_point() and not bool(torch.isfinite(local).all()):
            bad.append(name)
    return bad


def nonfinite_weights_message(bad: list[str], version: int) -> str:
    """Why a checkpoint of weight ``version`` is refused (``bad``: tensor names, may be empty).

    Empty ``bad`` means another data-parallel rank found the non-finite values.
    """
    where = ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else "") if bad else "another rank's shard"
    return (
        f"refusing to checkpoint weight version {version}: non-finite values in {where}; "
        "training has diverged: lower actor.lr and resume from the last checkpoint"
    )
