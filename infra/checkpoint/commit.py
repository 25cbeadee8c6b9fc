"""The driver's files of a checkpoint and its commit: ``COMPLETE``, then the manifest.

After the runtime's parts are written (:mod:`infra.checkpoint.parts`), the session adds its
own parts (the driver's generators, the config, the env spaces), the ``COMPLETE`` marker
and last the manifest (:meth:`~infra.checkpoint.store.CheckpointStore.commit`): a crash at
any point before leaves the previous checkpoint the latest one.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from infra.checkpoint.layout import (
    COMPLETE_BYTES,
    COMPLETE_FILE,
    CONFIG_FILE,
    DRIVER_RNG_FILE,
    JSON,
    JSON_INDENTED,
    RAW,
    SPACES_FILE,
    StatePart,
    read_part,
    write_file,
)
from infra.checkpoint.parts import write_states
from infra.checkpoint.store import CheckpointStore, step_dir_name

logger = logging.getLogger(__name__)


def rng_state() -> dict[str, Any]:
    """The driver's python/numpy/torch RNG states as JSON-able data."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, list(internal), gauss],
        "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(state: dict[str, Any], step: int = 0) -> None:
    """Put back what :func:`rng_state` returned (``step`` is unused)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


#: The driver's generators: the one session part a resume puts back.
DRIVER_RNG = StatePart(DRIVER_RNG_FILE, JSON, rng_state, set_rng_state)


def driver_parts(config: dict[str, Any], spaces: Any = None) -> list[StatePart]:
    """The session's parts: its generators (restored), the config and the env spaces.

    Args:
        config: The resolved config (JSON form).
        spaces: The env spaces the model was built for (None: the model takes none, and no
            ``spaces.json`` is written).
    """
    parts = [
        DRIVER_RNG,
        StatePart(CONFIG_FILE, JSON_INDENTED, lambda: config),
    ]
    if spaces is not None:
        from rl_core.envs.spaces import env_spaces_to_dict

        parts.append(StatePart(SPACES_FILE, JSON_INDENTED, lambda: env_spaces_to_dict(spaces)))
    return parts


def commit_checkpoint(
    store: CheckpointStore, step: int, parts: list[StatePart], meta: dict[str, Any]
) -> dict[str, Any]:
    """Write the driver's parts and ``COMPLETE`` into the step folder, then the manifest.

    Args:
        store: The run's store (the runtime's parts are written already).
        step: The checkpoint's step.
        parts: The session's parts (:func:`driver_parts`).
        meta: The manifest's fields besides format, step and folder.

    Returns:
        The committed manifest.
    """
    folder = step_dir_name(step)
    write_states(store, folder, [(part, part.get()) for part in parts])
    write_file(store, folder, COMPLETE_FILE, RAW, COMPLETE_BYTES)
    return store.commit(step, meta)


def restore_driver(
    store: CheckpointStore,
    folder: str,
    step: int,
    trust: bool = False,
    parts: Sequence[StatePart] = (DRIVER_RNG,),
) -> None:
    """Put back the session's parts that are restored (the driver's generators)."""
    for part in parts:
        if part.put is not None:
            part.put(read_part(store, folder, part, trust), step)


def drop_partial_checkpoint(
    store: CheckpointStore, step: int, manifest: dict[str, Any] | None
) -> None:
    """Delete what a failed write of ``step`` left (never a committed checkpoint)."""
    if manifest is not None and manifest["step"] == step:
        return  # committed by an earlier attempt: it stays
    folder = step_dir_name(step)
    try:
        store.delete_folder(folder)
    except Exception:  # noqa: BLE001 - the disk is full: deleting may fail too
        logger.warning("could not delete the partial checkpoint %s", folder, exc_info=True)


def apply_retention(
    store: CheckpointStore, step: int, keep_last: int | None, best_step: int | None
) -> list[int]:
    """Delete committed checkpoints beyond the last ``keep_last`` (``run.keep_checkpoints``).

    Args:
        store: The run's store.
        step: The checkpoint just committed.
        keep_last: How many of the newest to keep (None: keep every checkpoint).
        best_step: The step of the run's best evaluation, kept as well (None: none yet).

    Returns:
        The deleted steps.
    """
    if keep_last is None:
        return []
    committed = [s for s in store.checkpoint_steps() if s <= step]
    keep = set(committed[-keep_last:])
    if best_step is not None:
        keep.add(best_step)
    deleted = store.prune(keep)
    if deleted:
        logger.info(
            "run.keep_checkpoints=%d: deleted checkpoint step(s) %s (kept %s)",
            keep_last,
            ", ".join(map(str, deleted)),
            ", ".join(map(str, sorted(keep))),
        )
    return deleted


def log_checkpoint_folder(store: CheckpointStore, folder: str, tracker: Any) -> str:
    """Log a checkpoint folder to the MLflow run (copied through a temp dir if remote).

    Args:
        store: The run's store.
        folder: The committed step folder.
        tracker: The run's tracker (its ``log_artifacts(local_dir, artifact_path)``).

    Returns:
        The artifact path: ``checkpoints/<folder>``.
    """
    artifact_path = f"checkpoints/{folder}"
    local = store.local_path(folder)
    if local is not None:
        tracker.log_artifacts(local, artifact_path)
        return artifact_path
    with tempfile.TemporaryDirectory(prefix="rlpipe-ckpt-") as tmp:
        tracker.log_artifacts(store.download(folder, tmp), artifact_path)
    return artifact_path
