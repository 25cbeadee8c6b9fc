"""FSDP2 across Ray actors: process groups, sharding by wrap policy, state dicts, DCP.

Each trainer rank is a Ray actor; rank 0 names a rendezvous address on its own node (the
node's IP as Ray knows it and a port free there: ranks on other nodes reach it) and every
rank joins ``init_process_group`` at it (gloo for ranks on the CPU, NCCL for ranks on the GPU
Ray assigned them: :func:`resolve_backend` goes by the rank's device, never by whether the
machine has CUDA). Parameters are sharded with
``fully_shard`` per wrapped module and at the root.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from infra.checkpoint import signed_dcp

logger = logging.getLogger(__name__)


def resolve_backend(backend: str, device: torch.device | str) -> str:
    """The process-group backend of a rank computing on ``device``.

    Args:
        backend: ``auto``, ``gloo`` or ``nccl`` (the last two are returned as they are).
        device: The rank's device (``WorkerBase.device``).

    Returns:
        For ``auto``: ``nccl`` when ``device`` is a CUDA device, else ``gloo``.
    """
    if backend != "auto":
        return backend
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def rendezvous_address() -> str:
    """``host:port`` of a free TCP port on this process's node, at the node's Ray address.

    Called on rank 0: the other ranks, wherever Ray placed them, connect to it. The port is
    found by binding the node's address (port 0) and releasing it.
    """
    import ray

    host = ray.util.get_node_ip_address()
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def init_process_group(
    backend: str, rank: int, world_size: int, address: str, device: torch.device | str
) -> None:
    """Join the trainer's process group at ``address`` (no-op if this process joined one).

    Args:
        backend: ``auto``, ``gloo`` or ``nccl``.
        rank: This rank.
        world_size: Number of ranks.
        address: Rank 0's :func:`rendezvous_address`.
        device: This rank's device (picks the backend for ``auto``).
    """
    if dist.is_initialized():
        return
    dist.init_process_group(
        resolve_backend(backend, device),
        init_method=f"tcp://{address}",
        rank=rank,
        world_size=world_size,
    )


def modules_to_wrap(model: torch.nn.Module, wrap_policy: Any) -> list[torch.nn.Module]:
    """Submodules FSDP2 shards as units.

    Class names from ``transformer_layer_cls_to_wrap`` (default: the Hugging Face model's
    ``_no_split_modules``) and ``module_classes_to_wrap``, plus modules whose
    ``_fsdp_wrap_name`` is in ``no_split_names``.
    """
    hf = getattr(model, "pretrained_model", None)
    inner = hf() if callable(hf) else model
    layer_names = set(wrap_policy.transformer_layer_cls_to_wrap) or set(
        getattr(inner, "_no_split_modules", None) or []
    )
    class_names = layer_names | set(wrap_policy.module_classes_to_wrap)
    named = set(wrap_policy.no_split_names)
    return [
        m
        for m in model.modules()
        if m is not model
        and (type(m).__name__ in class_names or getattr(m, "_fsdp_wrap_name", None) in named)
    ]


def shard_model(
    model: torch.nn.Module, wrap_policy: Any, compute_dtype: torch.dtype | None = None
) -> int:
    """Apply ``fully_shard`` to the wrapped modules, then to the root; returns the unit count.

    Args:
        model: The model (its parameters in their stored dtype).
        wrap_policy: Which modules are sharded units.
        compute_dtype: Forward and backward in this dtype, gradients reduced in float32
            (FSDP2's ``MixedPrecisionPolicy``); None: in the parameters' own dtype.
    """
    options = {}
    if compute_dtype is not None:
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=compute_dtype, reduce_dtype=torch.float32
        )
    units = modules_to_wrap(model, wrap_policy)
    for module in units:
        fully_shard(module, **options)
    fully_shard(model, **options)
    return len(units) + 1


def trainable_names(model: torch.nn.Module) -> set[str]:
    """State-dict names of the parameters that train (with LoRA: adapters and heads)."""
    return {name for name, p in model.named_parameters() if p.requires_grad}


def _model_state(
    model: torch.nn.Module, options: StateDictOptions, trainable_only: bool
) -> dict[str, torch.Tensor]:
    """``get_model_state_dict``; only the trainable parameters' entries if asked."""
    if not trainable_only:
        return get_model_state_dict(model, options=options)
    options = StateDictOptions(**{**options.__dict__, "ignore_frozen_params": True})
    keep = trainable_names(model)  # a frozen weight tied to another can still appear
    return {k: v for k, v in get_model_state_dict(model, options=options).items() if k in keep}


def full_state_dict(
    model: torch.nn.Module, every_rank: bool = False, trainable_only: bool = False
) -> dict[str, torch.Tensor]:
    """The unsharded state dict (collective: every rank calls).

    Args:
        model: The sharded model.
        every_rank: Every rank gets the whole state dict on the model's device; otherwise
            rank 0 gets it on the CPU (other ranks get an empty dict).
        trainable_only: Only the parameters that train (LoRA: frozen base weights are
            neither gathered nor returned).
    """
    options = StateDictOptions(full_state_dict=True, cpu_offload=not every_rank)
    return _model_state(model, options, trainable_only)


def save_sharded(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    path: Path,
    trainable_only: bool = False,
) -> None:
    """Write model and optimizer shards with torch.distributed.checkpoint (collective).

    The folder's metadata is signed (:mod:`infra.checkpoint.signed_dcp`).

    Args:
        model: The sharded model.
        optimizer: Its optimizer.
        path: The DCP folder.
        trainable_only: Leave frozen parameters out (LoRA: the adapters alone).
    """
    state = {
        "model": _model_state(model, StateDictOptions(), trainable_only),
        "optim": get_optimizer_state_dict(model, optimizer),
    }
    signed_dcp.save(state, path)


def load_sharded(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    path: Path,
    trust: bool = False,
    trainable_only: bool = False,
) -> None:
    """Restore what :func:`save_sharded` wrote (collective).

    Args:
        model: The sharded model.
        optimizer: Its optimizer.
        path: The DCP folder.
        trust: Load metadata not signed with this user's key (with a warning).
        trainable_only: The folder holds the trainable parameters alone (LoRA); the
            frozen ones keep the values they have.

    Raises:
        CheckpointError: The metadata's signature is missing or wrong (without ``trust``).
    """
    state = {
        "model": _model_state(model, StateDictOptions(), trainable_only),
        "optim": get_optimizer_state_dict(model, optimizer),
    }
    signed_dcp.load(state, path, trust)
    set_model_state_dict(model, state["model"], options=StateDictOptions(strict=not trainable_only))
    set_optimizer_state_dict(model, optimizer, state["optim"])


def destroy() -> None:
    """Leave the process group (if joined)."""
    if dist.is_initialized():
        dist.destroy_process_group()
