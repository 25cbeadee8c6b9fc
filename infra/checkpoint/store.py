"""Checkpoint store: files per step, committed by writing the ``latest`` manifest last.

Layout under the store root (one store per run)::

    step_000010/actor_0/model.safetensors ...   files of one checkpoint
    latest.json                                 {"step": 10, "dir": "step_000010", ...}

A checkpoint becomes visible only when ``latest.json`` is replaced (temp file + rename), after
all its files are written, so a crash mid-save never leaves a half checkpoint as latest.

Every path a store reads or writes is checked by :func:`check_relpath` (relative, ``/``
-separated, no ``.``/``..``/empty parts; a local store also refuses symbolic links that lead
out of its root), and the manifest's ``dir`` must be the step folder name of its ``step``,
so nothing read from a manifest or a bucket can reach a path outside the store.
"""

from __future__ import annotations

import abc
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST = "latest.json"
#: The marker of a complete step folder (written after every other file of it).
COMPLETE_FILE = "COMPLETE"
FORMAT_VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or inconsistent."""


def step_dir_name(step: int) -> str:
    """Directory name of the checkpoint taken after ``step`` iterations."""
    return f"step_{step:06d}"


def check_relpath(relpath: str) -> str:
    """Validate a path inside a store (every store read and write goes through this).

    A single trailing ``/`` (a folder prefix) is allowed.

    Returns:
        ``relpath`` unchanged.

    Raises:
        CheckpointError: Not a relative ``/``-separated path of non-empty names other than
            ``.`` and ``..`` (absolute paths, backslashes and NUL bytes are refused too).
    """
    parts = relpath.removesuffix("/").split("/") if isinstance(relpath, str) else [""]
    if any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        raise CheckpointError(
            f"{relpath!r} is not a path inside a checkpoint store: expected a relative path "
            "of '/'-separated names, none of them empty, '.' or '..'"
        )
    return relpath


def check_manifest_dir(folder: Any, step: int, where: str) -> str:
    """The manifest's ``dir``, which must be ``step_dir_name(step)`` (a folder of the store).

    Raises:
        CheckpointError: Anything else (another name, separators, ``..``, absolute paths).
    """
    expected = step_dir_name(step)
    if step < 0 or folder != expected:
        raise CheckpointError(
            f"{where} names dir {folder!r} for step {step}; a manifest may only name that "
            f"step's folder {expected!r} of its own store, refusing to resume"
        )
    return folder


class CheckpointStore(abc.ABC):
    """Where a run's checkpoints live; workers and the driver open it from its URI.

    Implementations pass every ``relpath`` they are given through :func:`check_relpath`
    before using it, so no path from a manifest or a listing leaves the store.
    """

    uri: str

    @abc.abstractmethod
    def write_bytes(self, relpath: str, data: bytes) -> None:
        """Write one file (relative to the store root)."""

    @abc.abstractmethod
    def read_bytes(self, relpath: str) -> bytes:
        """Read one file; raises :class:`CheckpointError` if missing."""

    @abc.abstractmethod
    def exists(self, relpath: str) -> bool:
        """Whether a file exists."""

    @abc.abstractmethod
    def _replace_manifest(self, data: bytes) -> None:
        """Atomically replace the manifest."""

    @abc.abstractmethod
    def local_path(self, relpath: str) -> Path | None:
        """A local path for ``relpath`` if the store is on disk (else None)."""

    @abc.abstractmethod
    def list_files(self, folder: str) -> list[str]:
        """Paths (relative to the store root) of every file under ``folder``, sorted."""

    @abc.abstractmethod
    def checkpoint_steps(self) -> list[int]:
        """The steps of the ``step_*`` folders in the store (committed or not), sorted."""

    @abc.abstractmethod
    def delete_folder(self, folder: str) -> None:
        """Delete every file under ``folder`` (a ``step_*`` folder)."""

    def prune(self, keep_steps: set[int]) -> list[int]:
        """Delete the checkpoint folders of other steps than ``keep_steps``.

        Never deletes the folder the manifest points at, nor one newer than it (a checkpoint
        being written has no manifest yet).

        Returns:
            The deleted steps.
        """
        latest = self.latest()
        if latest is None:
            return []
        newest_kept = int(latest["step"])
        deleted = []
        for step in self.checkpoint_steps():
            if step in keep_steps or step >= newest_kept:
                continue
            self.delete_folder(step_dir_name(step))
            deleted.append(step)
        return deleted

    def download(self, folder: str, dest: str | os.PathLike) -> Path:
        """Copy every file under ``folder`` into the local directory ``dest``.

        Returns:
            ``dest`` as a path; ``dest/<file relative to folder>`` for each file.

        Raises:
            CheckpointError: A listed file would land outside ``dest`` (a name with ``..``,
                an absolute part or a symbolic link out of ``dest``); nothing is written then.
        """
        target = Path(dest).resolve()
        prefix = check_relpath(folder).rstrip("/") + "/"
        plan: list[tuple[str, Path]] = []
        for relpath in self.list_files(folder):
            if relpath.endswith("/"):
                continue  # an S3 "folder" marker object, not a file
            inner = relpath[len(prefix) :] if relpath.startswith(prefix) else ""
            try:
                path = target / check_relpath(inner)
            except CheckpointError:
                path = None
            if path is None or not _is_within(path, target):
                raise CheckpointError(
                    f"{self.uri}/{relpath} would be written outside {target}; refusing to "
                    f"download {folder}"
                )
            plan.append((relpath, path))
        for relpath, path in plan:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(self.read_bytes(relpath))
        return target

    def commit(self, step: int, meta: dict[str, Any]) -> dict[str, Any]:
        """Make the checkpoint of ``step`` the latest one.

        Args:
            step: Iterations completed when the checkpoint was taken.
            meta: Extra fields for the manifest (MLflow run id, counters...).
        """
        manifest = {"format": FORMAT_VERSION, "step": step, "dir": step_dir_name(step), **meta}
        self._replace_manifest(json.dumps(manifest, indent=2, sort_keys=True).encode())
        return manifest

    def latest(self) -> dict[str, Any] | None:
        """The committed manifest, or None if this run has no checkpoint.

        Raises:
            CheckpointError: The manifest exists but is corrupt or names missing files.
        """
        if not self.exists(MANIFEST):
            return None
        raw = self.read_bytes(MANIFEST)
        try:
            manifest = json.loads(raw)
            step, folder = int(manifest["step"]), manifest["dir"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"{self.uri}/{MANIFEST} is corrupt ({exc}); refusing to resume"
            ) from None
        if manifest.get("format") != FORMAT_VERSION:
            raise CheckpointError(
                f"{self.uri}/{MANIFEST} has format {manifest.get('format')!r}; this rlpipe reads {FORMAT_VERSION}"
            )
        check_manifest_dir(folder, step, f"{self.uri}/{MANIFEST}")
        if not self.exists(f"{folder}/{COMPLETE_FILE}"):
            raise CheckpointError(f"{self.uri}/{folder} named by {MANIFEST} is incomplete")
        manifest["step"] = step
        return manifest


class LocalCheckpointStore(CheckpointStore):
    """Checkpoint store on a local (or network-mounted) file system."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        self.uri = str(self.root)

    def write_bytes(self, relpath: str, data: bytes) -> None:  # noqa: D102
        path = self._path(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)

    def read_bytes(self, relpath: str) -> bytes:  # noqa: D102
        path = self._path(relpath)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint file {path} is missing") from None

    def exists(self, relpath: str) -> bool:  # noqa: D102
        return self._path(relpath).exists()

    def _replace_manifest(self, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.root / MANIFEST, data)

    def local_path(self, relpath: str) -> Path:  # noqa: D102
        return self._path(relpath)

    def list_files(self, folder: str) -> list[str]:  # noqa: D102
        base = self._path(folder)
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not p.name.endswith(".tmp")
        )

    def checkpoint_steps(self) -> list[int]:  # noqa: D102
        return sorted(
            int(child.name.removeprefix("step_"))
            for child in self.root.glob("step_*")
            if child.is_dir() and child.name.removeprefix("step_").isdigit()
        )

    def delete_folder(self, folder: str) -> None:  # noqa: D102
        shutil.rmtree(self._path(folder), ignore_errors=True)

    def _path(self, relpath: str) -> Path:
        """``root/relpath`` after :func:`check_relpath`; refuses links out of the root."""
        path = self.root / check_relpath(relpath)
        if not _is_within(path, self.root):
            raise CheckpointError(
                f"{path} leads outside the checkpoint store {self.root} (through a symbolic "
                "link); refusing to use it"
            )
        return path


def _is_within(path: Path, root: Path) -> bool:
    """Whether ``path`` (symbolic links followed) is ``root`` (a resolved path) or inside it."""
    return path.resolve().is_relative_to(root)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: URI scheme -> store class, or ``"module:attribute"`` imported on first use (so boto3 is
#: imported only by runs that use an ``s3://`` store). Paths without a scheme are local.
_SCHEMES: dict[str, str | Callable[[str], CheckpointStore]] = {
    "s3": "infra.checkpoint.s3_store:S3CheckpointStore",
}


def register_store_scheme(scheme: str, factory: str | Callable[[str], CheckpointStore]) -> None:
    """Make :func:`open_store` open ``<scheme>://...`` URIs with ``factory``.

    Args:
        scheme: URI scheme without ``://`` (case-insensitive).
        factory: A callable taking the URI, or ``"module:attribute"`` naming one.
    """
    _SCHEMES[scheme.lower()] = factory


def open_store(uri: str) -> CheckpointStore:
    """Open the store at ``uri``: a local path or ``<scheme>://...`` of a registered scheme.

    Raises:
        CheckpointError: The URI's scheme has no store.
    """
    scheme, sep, _ = uri.partition("://")
    if not sep:
        return LocalCheckpointStore(uri)
    factory = _SCHEMES.get(scheme.lower())
    if factory is None:
        known = ", ".join(f"{s}://" for s in sorted(_SCHEMES))
        raise CheckpointError(
            f"no checkpoint store for {uri!r}: use a local path or one of {known}"
        )
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(uri)
