"""Weight sync from the trainer to rollout workers, through Ray's object store as numpy.

Two modes (``rollout.weight_sync_mode``):

* ``bucket``: the full state dict in size-capped buckets (optionally cast, e.g. to bf16).
* ``patch``: only the elements that changed since the last sync, as (flat index, value)
  pairs per tensor, with a full sync every ``patch_full_sync_interval`` syncs and whenever
  the receiver's version does not match the sender's base version.

bfloat16 has no numpy dtype: such tensors travel as their int16 bit pattern and are viewed
back on arrival.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_wire(tensor: torch.Tensor) -> np.ndarray | dict[str, np.ndarray]:
    """A tensor as numpy (bfloat16 as ``{"bf16": int16 bits}``)."""
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return {"bf16": t.view(torch.int16).numpy()}
    return t.numpy()


def from_wire(arr: np.ndarray | dict[str, np.ndarray]) -> torch.Tensor:
    """Inverse of :func:`to_wire` (a writable copy: object-store arrays are read-only)."""
    if isinstance(arr, dict):
        return torch.from_numpy(np.array(arr["bf16"], copy=True)).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr, copy=True))


def _nbytes(arr: Any) -> int:
    if isinstance(arr, dict):
        return int(sum(_nbytes(v) for v in arr.values()))
    return int(arr.nbytes)


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
        arr = to_wire(t)
        if current and size + _nbytes(arr) > bucket_bytes:
            buckets.append(current)
            current, size = {}, 0
        current[name] = arr
        size += _nbytes(arr)
    if current:
        buckets.append(current)
    return buckets


def buckets_to_state_dict(buckets: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Reassemble buckets into a state dict of tensors (copies: object-store arrays are read-only)."""
    out: dict[str, torch.Tensor] = {}
    for bucket in buckets:
        for name, arr in bucket.items():
            out[name] = from_wire(arr)
    return out


def bucket_nbytes(buckets: list[dict[str, Any]]) -> int:
    """Total payload bytes of a bucket list."""
    return int(sum(_nbytes(a) for b in buckets for a in b.values()))


class WeightSender:
    """Trainer side: turns the current state dict into a sync payload (bucket or patch).

    Args:
        mode: ``bucket`` or ``patch``.
        bucket_bytes: Size cap of one bucket.
        dtype: Cast floating tensors to this dtype for the transfer (None keeps them).
        full_interval: ``patch`` mode: every this many syncs is a full one.
    """

    def __init__(
        self,
        mode: str = "bucket",
        bucket_bytes: int = 64 * 2**20,
        dtype: torch.dtype | None = None,
        full_interval: int = 10,
    ) -> None:
        if mode not in ("bucket", "patch"):
            raise ValueError(f"weight sync mode must be 'bucket' or 'patch', got {mode!r}")
        self.mode, self.bucket_bytes, self.dtype = mode, bucket_bytes, dtype
        self.full_interval = full_interval
        self.syncs = 0
        self.sent: dict[str, torch.Tensor] = {}  # flat tensors as last sent (patch mode)
        self.base_version: int | None = None

    def reset(self) -> None:
        """Forget what was sent: the next payload is a full one (e.g. after a resume)."""
        self.sent, self.base_version, self.syncs = {}, None, 0

    def _cast(self, tensor: torch.Tensor) -> torch.Tensor:
        t = tensor.detach().cpu()
        return t.to(self.dtype) if self.dtype is not None and t.is_floating_point() else t

    def payload(self, state_dict: dict[str, torch.Tensor], version: int) -> dict[str, Any]:
        """The sync payload for weights of ``version``.

        Returns:
            ``{"mode": "full", "version", "buckets"}`` or ``{"mode": "patch", "version",
            "base_version", "buckets"}`` where patch buckets map a name to
            ``{"index": int64, "values": ...}`` of the changed elements.
        """
        full = (
            self.mode == "bucket"
            or self.base_version is None
            or self.syncs % self.full_interval == 0
        )
        self.syncs += 1
        if full:
            cast = {k: self._cast(v) for k, v in state_dict.items()}
            if self.mode == "patch":
                self.sent = {k: v.flatten().clone() for k, v in cast.items()}
            self.base_version = version
            buckets = state_dict_to_buckets(cast, self.bucket_bytes)
            return {"mode": "full", "version": version, "buckets": buckets}
        buckets: list[dict[str, Any]] = []
        current: dict[str, Any] = {}
        size = 0
        for name, tensor in state_dict.items():
            flat = self._cast(tensor).flatten()
            changed = torch.nonzero(flat != self.sent[name]).squeeze(-1)
            if changed.numel() == 0:
                continue
            entry = {"index": changed.numpy(), "values": to_wire(flat[changed])}
            self.sent[name][changed] = flat[changed]
            nbytes = _nbytes(entry["index"]) + _nbytes(entry["values"])
            if current and size + nbytes > self.bucket_bytes:
                buckets.append(current)
                current, size = {}, 0
            current[name] = entry
            size += nbytes
        if current:
            buckets.append(current)
        base, self.base_version = self.base_version, version
        return {"mode": "patch", "version": version, "base_version": base, "buckets": buckets}


def payload_nbytes(payload: dict[str, Any]) -> int:
    """Bytes a payload moves (indices included)."""
    total = 0
    for bucket in payload["buckets"]:
        for entry in bucket.values():
            parts = entry.values() if isinstance(entry, dict) and "index" in entry else [entry]
            total += sum(_nbytes(p) for p in parts)
    return total


class StaleWeightsError(RuntimeError):
    """A patch was built on weights the receiver does not hold: a full sync is needed."""


def apply_payload(
    module: torch.nn.Module, payload: dict[str, Any], current_version: int | None
) -> int:
    """Receiver side: load a :class:`WeightSender` payload into ``module``; returns the version.

    The payload's CPU arrays are copied into the module's tensors on their device.

    Raises:
        StaleWeightsError: A patch whose base version differs from ``current_version``.
    """
    if payload["mode"] == "full":
        state = buckets_to_state_dict(payload["buckets"])
        module.load_state_dict(state, strict=True)
        return int(payload["version"])
    if payload["base_version"] != current_version:
        raise StaleWeightsError(
            f"patch for version {payload['version']} is based on version "
            f"{payload['base_version']}, but these weights are version {current_version}"
        )
    params = dict(module.state_dict(keep_vars=True))
    with torch.no_grad():
        for bucket in payload["buckets"]:
            for name, entry in bucket.items():
                target = params[name]
                index = torch.from_numpy(np.array(entry["index"], copy=True)).to(target.device)
                values = from_wire(entry["values"]).to(device=target.device, dtype=target.dtype)
                target.view(-1)[index] = values
    return int(payload["version"])
