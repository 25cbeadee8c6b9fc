"""Padding token sequences into the batch layout the trainer uses.

A training row is ``[prompt (left-padded to P) | response (right-padded to R)]``: every
prompt ends at column ``P - 1`` and every response starts at column ``P``, so the logits
predicting response token ``t`` sit at column ``P - 1 + t`` for every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _pad(
    sequences: Sequence[Sequence[int]], pad_id: int, length: int | None, left: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max((len(s) for s in sequences), default=0) if length is None else length
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if len(seq) > width:
            raise ValueError(f"sequence {row} has {len(seq)} tokens, more than {width}")
        if seq:
            cols = slice(width - len(seq), width) if left else slice(0, len(seq))
            ids[row, cols] = torch.as_tensor(list(seq), dtype=torch.long)
            mask[row, cols] = 1
    return ids, mask


def pad_left(
    sequences: Sequence[Sequence[int]], pad_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad ``sequences`` to ``length`` (default: the longest).

    Returns:
        ``(ids, mask)``, both ``[B, length]`` int64 (mask 1 on real tokens).
    """
    return _pad(sequences, pad_id, length, left=True)


def pad_right(
    sequences: Sequence[Sequence[int]], pad_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``sequences`` to ``length`` (default: the longest); see :func:`pad_left`."""
    return _pad(sequences, pad_id, length, left=False)


def pad_loss_masks(
    loss_masks: Sequence[Sequence[float]] | None,
    sequences: Sequence[Sequence[int]],
    length: int | None = None,
) -> torch.Tensor:
    """Right-pad per-row loss masks with 0, as :func:`pad_right` pads ``sequences``.

    A loss mask marks the response tokens the losses train on (1: the model produced it;
    0: tool output appended to a multi-turn trajectory; see
    :mod:`rl_core.training.loss_mask`).

    Args:
        loss_masks: One 0/1 list per row, as long as its sequence; None (or an empty list
            for a batch of rows): every token is trained on.
        sequences: The rows' response tokens.
        length: Padded width (default: the longest sequence).

    Returns:
        ``[B, length]`` float32, 0 on padding.

    Raises:
        ValueError: A mask's length differs from its sequence's, or the masks are not one
            per row.
    """
    width = max((len(s) for s in sequences), default=0) if length is None else length
    if not loss_masks:
        return _pad(sequences, 0, width, left=False)[1].float()
    if len(loss_masks) != len(sequences):
        raise ValueError(f"{len(loss_masks)} loss masks for {len(sequences)} rows")
    out = torch.zeros((len(sequences), width), dtype=torch.float32)
    for row, (mask, seq) in enumerate(zip(loss_masks, sequences, strict=True)):
        if len(mask) != len(seq):
            raise ValueError(f"row {row}: a loss mask of {len(mask)} values for {len(seq)} tokens")
        if len(seq) > width:
            raise ValueError(f"sequence {row} has {len(seq)} tokens, more than {width}")
        if seq:
            out[row, : len(seq)] = torch.as_tensor(list(mask), dtype=torch.float32)
    return out


def sequences_from_padded(ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """The real tokens of each row (inverse of the padding functions)."""
    return [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
