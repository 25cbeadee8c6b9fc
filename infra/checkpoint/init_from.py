"""``run.init_from``: a new run starts from trained weights.

The driver resolves the source before any worker starts
(:func:`infra.driver.init_from.apply_init_from`): a registered model version
(``models:/<name>@<alias>``, ``/<version>``, ``/latest``) is downloaded from the tracking
server's registry into ``<output_dir>/<run>/init_model``, an exported model folder is used
where it is. A language model's folder becomes ``model.model_path`` (it is a Hugging Face
directory); any other policy's becomes ``model.init_weights``, which the trainer loads
after building the policy (:func:`load_initial_weights`). A resumed run ignores
``init_from``: its checkpoint holds the weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.checkpoint.export import WEIGHT_FORMATS, ExportError, read_export_meta
from infra.checkpoint.store import CheckpointError


class InitFromError(CheckpointError):
    """``run.init_from`` names no usable model (missing, another model type, unreadable)."""


def start_from_init_weights(policy: Any, model_cfg: Any) -> None:
    """Load ``model.init_weights`` into a freshly built policy, when it is set."""
    directory = model_cfg.init_weights
    if directory:
        load_initial_weights(policy, directory)


def load_initial_weights(policy: Any, directory: str) -> None:
    """Load the weights of an exported model folder into a freshly built policy.

    Args:
        policy: The policy the trainer built from ``model`` (same type as the folder's).
        directory: ``model.init_weights``.

    Raises:
        InitFromError: The folder is not an exported model, or its weights do not fit.
    """
    try:
        meta = read_export_meta(directory)
        WEIGHT_FORMATS.get(meta["weights_format"]).load(policy, Path(directory))
    except (ExportError, KeyError, RuntimeError) as exc:
        raise InitFromError(f"model.init_weights={directory}: {exc}") from None
