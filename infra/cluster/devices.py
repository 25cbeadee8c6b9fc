"""The device a worker process computes on: the GPU Ray assigned it, else the CPU.

Ray gives a worker that reserved GPUs (``num_gpus`` > 0) their ids (``ray.get_gpu_ids()``)
and sets ``CUDA_VISIBLE_DEVICES`` to them, so inside the worker the first assigned GPU is
usually ``cuda:0`` — but not always (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES`` keeps
every GPU visible), so the local index is looked up, never assumed. A worker that reserved
no GPU computes on the CPU even where CUDA is visible: nothing picks "cuda:0 because it
exists".

Ray can also announce GPUs that are not there (``ray.init(num_gpus=4)`` on a CPU machine,
*logical* GPUs), which is how placements are tested without hardware. A worker given a
logical GPU by a torch that sees no CUDA fails with :class:`DeviceError`, unless
``RLPIPE_ALLOW_LOGICAL_GPUS=1`` is set: it then computes on the CPU (placement tests).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

#: Set to 1 to let workers given GPUs that torch cannot see run on the CPU.
ALLOW_LOGICAL_GPUS_VAR = "RLPIPE_ALLOW_LOGICAL_GPUS"


class DeviceError(RuntimeError):
    """The device Ray assigned cannot be used in this process."""


@dataclass(frozen=True)
class DeviceReport:
    """Where a worker runs: reported at start-up, logged by the driver, checked by tests.

    Attributes:
        group: Worker group (``actor``, ``rollout``, ``env``...).
        rank: Rank in the group.
        node_id: Ray node id of the process.
        gpu_ids: GPU ids Ray assigned (physical ids on the node; empty: none reserved).
        cuda_visible_devices: The process's ``CUDA_VISIBLE_DEVICES`` (None: unset).
        device: The torch device it computes on (``cuda:0``, ``cpu``).
        pid: Process id.
    """

    group: str
    rank: int
    node_id: str
    gpu_ids: tuple[int, ...]
    cuda_visible_devices: str | None
    device: str
    pid: int


def local_cuda_index(gpu_id: int, visible: str | None) -> int:
    """The CUDA index, inside this process, of the GPU Ray calls ``gpu_id``.

    Args:
        gpu_id: An id from ``ray.get_gpu_ids()`` (the node's numbering).
        visible: ``CUDA_VISIBLE_DEVICES`` of the process (None or empty: all GPUs visible,
            numbered as the node numbers them).

    Raises:
        DeviceError: ``gpu_id`` is not among the visible devices.
    """
    if not visible:
        return int(gpu_id)
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if str(gpu_id) not in entries:
        raise DeviceError(
            f"Ray assigned GPU {gpu_id} but CUDA_VISIBLE_DEVICES={visible!r} hides it"
        )
    return entries.index(str(gpu_id))


def resolve_device(
    gpu_ids: Sequence[int],
    visible: str | None,
    cuda_available: bool,
    allow_logical: bool = False,
    what: str = "this worker",
) -> torch.device:
    """The torch device for a process Ray assigned ``gpu_ids`` (pure; see :func:`assigned_device`).

    Args:
        gpu_ids: Ray's GPU ids of the process (empty: it reserved none → CPU).
        visible: ``CUDA_VISIBLE_DEVICES`` of the process.
        cuda_available: Whether torch sees CUDA here.
        allow_logical: Run on the CPU when Ray assigned GPUs torch cannot see.
        what: Who asks, for messages (``actor worker 1``).

    Raises:
        DeviceError: GPUs were assigned but torch sees no CUDA (and ``allow_logical`` is
            off), or the assigned GPU is hidden.
    """
    if not gpu_ids:
        return torch.device("cpu")
    if not cuda_available:
        if allow_logical:
            return torch.device("cpu")
        raise DeviceError(
            f"Ray assigned GPU(s) {list(gpu_ids)} to {what} but torch sees no CUDA device "
            f"(torch {torch.__version__}: a CPU-only build, or no driver); install a CUDA "
            "torch, or place the run on CPUs (cluster.device=cpu)"
        )
    return torch.device("cuda", local_cuda_index(int(gpu_ids[0]), visible))


def ray_gpu_ids() -> tuple[int, ...]:
    """GPU ids Ray assigned to this process (empty outside a Ray worker or without GPUs)."""
    import ray

    if not ray.is_initialized():
        return ()
    return tuple(int(float(gpu)) for gpu in ray.get_gpu_ids())


def assigned_device(what: str = "this worker") -> torch.device:
    """The device this Ray worker computes on; a CUDA device becomes the current one.

    Raises:
        DeviceError: See :func:`resolve_device`.
    """
    device = resolve_device(
        ray_gpu_ids(),
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        torch.cuda.is_available(),
        os.environ.get(ALLOW_LOGICAL_GPUS_VAR, "") in ("1", "true", "yes"),
        what,
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def device_report(group: str, rank: int, device: torch.device) -> DeviceReport:
    """What :class:`DeviceReport` says of this process."""
    import ray

    return DeviceReport(
        group=group,
        rank=rank,
        node_id=ray.get_runtime_context().get_node_id() if ray.is_initialized() else "",
        gpu_ids=ray_gpu_ids(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        device=str(device),
        pid=os.getpid(),
    )
