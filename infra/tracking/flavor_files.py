"""Putting the files of an MLflow model next to an rlpipe model directory's own.

MLflow's ``save_model`` functions write into a new directory; the flavor writers let them
write into a staging directory and move the result into the rlpipe model directory, so one
folder is both (``MLmodel`` and MLflow's environment files beside ``rlpipe_model.json``).
"""

from __future__ import annotations

import importlib.metadata
import shutil
from collections.abc import Iterable
from pathlib import Path

#: MLflow's model description file, at the root of an MLflow model.
MLMODEL_FILE = "MLmodel"


class MlflowFlavorError(RuntimeError):
    """An MLflow flavor cannot be added to a model directory."""


def pinned_requirements(*dists: str) -> list[str]:
    """``name==version`` of the installed distributions among ``dists``.

    A local version label (``torch 2.13.0+cpu``) is dropped, so the pin installs from PyPI;
    distributions that are not installed are left out.
    """
    pins = []
    for dist in dists:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        pins.append(f"{dist}=={version.split('+')[0]}")
    return pins


def directory_size(directory: Path) -> int:
    """Total size in bytes of the files under ``directory``."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def merge_into(staging: Path, model_dir: Path, leave_out: Iterable[str] = ()) -> list[str]:
    """Move the entries of ``staging`` into ``model_dir`` (none may exist there already).

    Args:
        staging: The directory MLflow saved the model to.
        model_dir: The rlpipe model directory.
        leave_out: Top-level names in ``staging`` not to move.

    Returns:
        The names moved, sorted.

    Raises:
        MlflowFlavorError: An entry would replace one of the model directory's (nothing is
            moved then).
    """
    skip = set(leave_out)
    names = sorted(p.name for p in staging.iterdir() if p.name not in skip)
    clashes = [name for name in names if (model_dir / name).exists()]
    if clashes:
        raise MlflowFlavorError(
            f"{model_dir} already has {clashes}: MLflow's files would replace them"
        )
    for name in names:
        shutil.move(str(staging / name), str(model_dir / name))
    return names
