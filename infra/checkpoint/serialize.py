"""Bytes ↔ objects for checkpoint files (safetensors for weights, weights-only torch.load)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from infra.checkpoint.store import CheckpointError


def tensors_to_bytes(tensors: dict[str, torch.Tensor]) -> bytes:
    """Serialize named tensors as safetensors (CPU copies of tensors on a GPU).

    Tensors that share memory (tied weights, e.g. a language model's embedding and output
    head) are written as separate copies: safetensors refuses shared storage.
    """
    seen: set[int] = set()
    out = {}
    for name, tensor in tensors.items():
        t = tensor.detach().cpu().contiguous()
        ptr = t.untyped_storage().data_ptr()
        out[name] = t.clone() if ptr in seen else t
        seen.add(ptr)
    return st_save(out)


def bytes_to_tensors(data: bytes, what: str) -> dict[str, torch.Tensor]:
    """Parse safetensors bytes; ``what`` names the file in errors."""
    try:
        return st_load(data)
    except Exception as exc:  # noqa: BLE001 - any parse failure means a bad file
        raise CheckpointError(f"{what} is not a valid safetensors file: {exc}") from None


def _has_device_tensors(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return obj.device.type != "cpu"
    if isinstance(obj, dict):
        return any(_has_device_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_device_tensors(v) for v in obj)
    return False


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_to_cpu(v) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj


def object_to_bytes(obj: Any) -> bytes:
    """Serialize tensors/containers of primitives with ``torch.save``.

    Tensors on a GPU (a trainer's optimizer state) are written as CPU tensors, so the file
    loads on any machine; whoever loads it puts them back on its device
    (``optimizer.load_state_dict`` casts state to its parameters' device).
    """
    if _has_device_tensors(obj):
        obj = _to_cpu(obj)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def bytes_to_object(data: bytes, what: str) -> Any:
    """Load with ``weights_only=True`` (no arbitrary code); ``what`` names the file.

    Tensors load on the CPU (also those of a file written elsewhere from a GPU).
    """
    try:
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001
        raise CheckpointError(f"{what} could not be loaded: {exc}") from None


def wrap_bytes(obj: Any) -> Any:
    """Wrap raw ``bytes`` and numpy arrays (in dicts/lists/tuples) as tensors for ``torch.save``.

    ``torch.load(weights_only=True)`` refuses ``bytes`` and numpy arrays; tensors load fine.

    Raises:
        CheckpointError: A numpy array of a dtype torch has no tensor for (e.g. objects).
    """
    if isinstance(obj, bytes):
        data = (
            torch.frombuffer(bytearray(obj), dtype=torch.uint8)
            if obj
            else torch.empty(0, dtype=torch.uint8)
        )
        return {"__bytes__": data}
    if isinstance(obj, np.ndarray):
        try:
            return {"__ndarray__": torch.from_numpy(np.array(obj, order="C", copy=True))}
        except TypeError:
            raise CheckpointError(
                f"cannot store a numpy array of dtype {obj.dtype} in a checkpoint; expected "
                "numbers or booleans"
            ) from None
    if isinstance(obj, dict):
        return {k: wrap_bytes(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(wrap_bytes(v) for v in obj)
    return obj


def unwrap_bytes(obj: Any) -> Any:
    """Inverse of :func:`wrap_bytes`."""
    if isinstance(obj, dict) and set(obj) == {"__bytes__"}:
        return obj["__bytes__"].numpy().tobytes()
    if isinstance(obj, dict) and set(obj) == {"__ndarray__"}:
        return obj["__ndarray__"].numpy()
    if isinstance(obj, dict):
        return {k: unwrap_bytes(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unwrap_bytes(v) for v in obj)
    return obj
