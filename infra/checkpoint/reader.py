"""Reading a committed training checkpoint back: config, policy weights, env spaces."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from infra.checkpoint.layout import COMPLETE_FILE, CONFIG_FILE, POLICY_WEIGHTS, SPACES_FILE
from infra.checkpoint.location import split_store_uri
from infra.checkpoint.serialize import bytes_to_tensors
from infra.checkpoint.signing import TRUST_HINT
from infra.checkpoint.store import (
    MANIFEST,
    CheckpointError,
    CheckpointStore,
    open_store,
    step_dir_name,
)

__all__ = [
    "CONFIG_FILE",
    "POLICY_WEIGHTS",
    "SPACES_FILE",
    "CheckpointRef",
    "locate_checkpoint",
    "read_config",
    "read_policy_weights",
    "read_spaces",
]


@dataclass
class CheckpointRef:
    """One complete checkpoint folder of a store.

    ``trusted``: the caller trusts the checkpoint's source (``--trust-checkpoint``), so its
    config may ask for the model's own code (``model.trust_remote_code``).
    """

    store: CheckpointStore
    folder: str
    step: int
    manifest: dict[str, Any]
    trusted: bool = False

    @property
    def location(self) -> str:
        """Human-readable location of the folder."""
        return f"{self.store.uri}/{self.folder}"


def locate_checkpoint(
    path: str | Path, step: int | None = None, trust: bool = False
) -> CheckpointRef:
    """Find a complete checkpoint from a store root or one of its ``step_*`` folders.

    Args:
        path: A run's checkpoint store (the folder or ``s3://`` prefix holding
            ``latest.json``) or one checkpoint folder inside it (``.../step_000010``).
        step: With a store root, the step to take (default: the latest committed one).
        trust: The checkpoint comes from a trusted source (see :class:`CheckpointRef`).

    Raises:
        CheckpointError: Nothing committed there, or the folder is incomplete/missing.
    """
    uri = str(path)
    parent, name = split_store_uri(uri)
    store = open_store(uri)
    if name.startswith("step_") or store.exists(COMPLETE_FILE):
        if step is not None:
            raise CheckpointError(f"{uri} is one checkpoint folder; --step applies to a store")
        store, folder = open_store(parent), name
    else:
        latest = store.latest()
        if latest is None:
            raise CheckpointError(
                f"no committed checkpoint in {uri} (expected {MANIFEST} or a step_* folder)"
            )
        folder = latest["dir"] if step is None else step_dir_name(step)
    if not store.exists(f"{folder}/{COMPLETE_FILE}"):
        raise CheckpointError(f"{store.uri}/{folder} is not a complete checkpoint")
    manifest = store.latest() or {}
    try:
        step_done = int(folder.split("_")[-1])
    except ValueError:
        raise CheckpointError(f"{store.uri}/{folder} is not a step_* checkpoint folder") from None
    return CheckpointRef(store, folder, step_done, manifest, trust)


def read_config(ref: CheckpointRef) -> dict[str, Any]:
    """The resolved run config saved in the checkpoint (plain dict).

    Raises:
        CheckpointError: Not JSON, or it sets ``model.trust_remote_code`` (building the
            model would run the model directory's own code) and ``ref`` is not trusted.
    """
    path = f"{ref.folder}/{CONFIG_FILE}"
    try:
        config = json.loads(ref.store.read_bytes(path))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{ref.store.uri}/{path} is not valid JSON: {exc}") from None
    model = config.get("model") if isinstance(config, dict) else None
    if isinstance(model, dict) and model.get("trust_remote_code") and not ref.trusted:
        raise CheckpointError(
            f"{ref.store.uri}/{path} sets model.trust_remote_code: true, so loading its model "
            f"would run code from {model.get('model_path')!r}; it was not loaded ({TRUST_HINT})"
        )
    return config


def read_policy_weights(ref: CheckpointRef) -> dict[str, torch.Tensor]:
    """The trainer's policy state dict."""
    path = f"{ref.folder}/{POLICY_WEIGHTS}"
    return bytes_to_tensors(ref.store.read_bytes(path), f"{ref.store.uri}/{path}")


def read_spaces(ref: CheckpointRef) -> dict[str, Any] | None:
    """The env spaces' JSON form, or None for checkpoints written before it was saved."""
    path = f"{ref.folder}/{SPACES_FILE}"
    if not ref.store.exists(path):
        return None
    try:
        return json.loads(ref.store.read_bytes(path))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{ref.store.uri}/{path} is not valid JSON: {exc}") from None
