"""Which response tokens an LLM batch trains on: its loss mask.

A batch's ``response_mask`` ``[N, R]`` marks the real (non-padding) response tokens: the
forward pass attends to all of them. Its optional ``loss_mask`` ``[N, R]`` marks the ones
the model produced (1) among them; the others (0: tool output appended to a multi-turn
trajectory, see :class:`rl_core.agents.trajectory.Trajectory`) are context only. Every loss,
KL and entropy term, aggregation denominator, token count and importance-sampling statistic
weighs the loss mask's tokens only. Without a ``loss_mask`` it is the response mask, so a
single-turn batch trains exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import torch

#: Batch key of the loss mask.
LOSS_MASK = "loss_mask"
#: Batch key of the response (attention) mask.
RESPONSE_MASK = "response_mask"

T = TypeVar("T", torch.Tensor, np.ndarray)


def loss_mask_of(batch: Mapping[str, T]) -> T:
    """The tokens the losses train on: ``batch["loss_mask"]``, else ``batch["response_mask"]``.

    Args:
        batch: An LLM batch (tensors or numpy arrays).

    Returns:
        ``[N, R]``, 1 on trained tokens (the batch's own array, not a copy).
    """
    mask = batch.get(LOSS_MASK)
    return batch[RESPONSE_MASK] if mask is None else mask


def check_loss_mask(batch: Mapping[str, Any]) -> None:
    """Check ``batch``'s loss mask (if any) against its response mask.

    Raises:
        ValueError: The loss mask differs in shape from the response mask, holds values
            other than 0 and 1, or is set on a padding token.
    """
    mask = batch.get(LOSS_MASK)
    if mask is None:
        return
    check_masks(mask, batch[RESPONSE_MASK])


def check_masks(loss_mask: Any, response_mask: Any) -> None:
    """Check a loss mask against its response mask (tensors or arrays, ``[N, R]``).

    Raises:
        ValueError: Shapes differ, a value is not 0 or 1, or a padding token is set.
    """
    loss = np.asarray(_host(loss_mask), dtype=np.float32)
    response = np.asarray(_host(response_mask), dtype=np.float32)
    if loss.shape != response.shape:
        raise ValueError(
            f"loss_mask {loss.shape} and response_mask {response.shape} differ in shape"
        )
    if not np.isin(loss, (0.0, 1.0)).all():
        raise ValueError("loss_mask must hold 0 (not trained on) or 1 (trained on) only")
    if (loss > response).any():
        raise ValueError(
            "loss_mask is 1 on a padding token: it must be 0 wherever response_mask is 0"
        )


def _host(x: Any) -> Any:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
