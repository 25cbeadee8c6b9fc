"""Where a run's checkpoint store is: one rule for training, evaluation and conversion."""

from __future__ import annotations

from pathlib import Path

from infra.checkpoint.store import CheckpointError
from rl_core.config import check_run_name


def is_remote(uri: str) -> bool:
    """Whether ``uri`` names a store by scheme (``s3://...``) rather than a local path."""
    return "://" in uri


def run_store_uri(output_dir: str | Path, run_name: str, checkpoint_uri: str | None = None) -> str:
    """The checkpoint store of run ``run_name``.

    Args:
        output_dir: The run's ``run.output_dir``.
        run_name: The run's ``run.name``.
        checkpoint_uri: ``run.checkpoint_uri``: None keeps checkpoints under
            ``<output_dir>/<run_name>/checkpoints``; a local path or ``s3://bucket/prefix``
            holds every run's store as ``<checkpoint_uri>/<run_name>``.

    Returns:
        An absolute local path or a URI such as ``s3://bucket/prefix/<run_name>``.

    Raises:
        CheckpointError: ``run_name`` is not a valid run name (one path component).
    """
    try:
        check_run_name(run_name)
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    if checkpoint_uri is None:
        return str(Path(output_dir).resolve() / run_name / "checkpoints")
    if is_remote(checkpoint_uri):
        return f"{checkpoint_uri.rstrip('/')}/{run_name}"
    return str(Path(checkpoint_uri).resolve() / run_name)


def split_store_uri(uri: str | Path) -> tuple[str, str]:
    """``(parent, last name)`` of a local path or a ``scheme://`` URI."""
    text = str(uri)
    if not is_remote(text):
        path = Path(text).resolve()
        return str(path.parent), path.name
    parent, _, name = text.rstrip("/").rpartition("/")
    return parent, name
