"""Full-state-dict weight sync in size-capped buckets of numpy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def state_dict_to_buckets(
    state_dict: dict[str, torch.Tensor], bucket_bytes: int, dtype: torch.dtype | None = None
) -> list[dict[str, np.ndarray]]:
    """Split a state dict into buckets of at most ``bucket_bytes``.

    A tensor larger than the cap gets a bucket of its own.

    Args:
        state_dict: Tensors to send.
        bucket_bytes: Size cap of one bucket.
        dtype: Cast floating tensors to this dtype first (None keeps them).
    """
    buckets: list[dict[str, np.ndarray]] = []
    current: dict[str, np.ndarray] = {}
    size = 0
    for name, tensor in state_dict.items():
        t = tensor.detach()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        arr = t.cpu().contiguous().numpy()
        if current and size + arr.nbytes > bucket_bytes:
            buckets.append(current)
            current, size = {}, 0
        current[name] = arr
        size += arr.nbytes
    if current:
        buckets.append(current)
    return buckets


def buckets_to_state_dict(buckets: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Reassemble buckets into a state dict of tensors (copies: object-store arrays are read-only)."""
    out: dict[str, torch.Tensor] = {}
    for bucket in buckets:
        for name, arr in bucket.items():
            out[name] = torch.from_numpy(np.array(arr, copy=True))
    return out


def bucket_nbytes(buckets: list[dict[str, Any]]) -> int:
    """Total payload bytes of a bucket list."""
    return int(sum(a.nbytes for b in buckets for a in b.values()))
