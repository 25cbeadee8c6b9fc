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


def sequences_from_padded(ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """The real tokens of each row (inverse of the padding functions)."""
    return [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
