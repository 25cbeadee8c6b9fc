"""Checkpoint stores with atomic commit (a ``latest`` manifest written last)."""

from infra.checkpoint.store import (
    CheckpointError,
    CheckpointStore,
    LocalCheckpointStore,
    open_store,
)

__all__ = ["CheckpointError", "CheckpointStore", "LocalCheckpointStore", "open_store"]
