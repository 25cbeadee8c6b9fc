"""Run lease in a local (or network-mounted) store folder: ``<store>/lease.json``.

The lease file is created atomically (written to a temp file, then hard-linked to its name:
the link fails if a lease exists) and replaced atomically (temp file + rename), so readers
never see half a record. Create, replace and delete run under an exclusive ``flock`` on
``<store>/lease.lock``, which makes "replace only if unchanged" a real compare-and-swap
between processes.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from infra.checkpoint.lease import LEASE_FILE, LeaseBackend, LeaseError, LeaseSnapshot

logger = logging.getLogger(__name__)

LOCK_FILE = "lease.lock"
#: Seconds to wait for another process's (short) critical section on the lock file.
LOCK_TIMEOUT_S = 10.0


def encode_record(record: dict[str, Any]) -> bytes:
    """The bytes of a lease record as stored."""
    return json.dumps(record, indent=2, sort_keys=True).encode()


def content_version(data: bytes) -> str:
    """Version of a lease file: the hash of its bytes."""
    return hashlib.sha256(data).hexdigest()


class LocalLeaseBackend(LeaseBackend):
    """``lease.json`` in the store folder ``store_root``.

    Args:
        store_root: The run's checkpoint store folder (created if missing).
    """

    def __init__(self, store_root: str | os.PathLike) -> None:
        self.folder = Path(store_root).resolve()
        self.path = self.folder / LEASE_FILE
        self.uri = str(self.path)
        self._warned_no_lock = False

    def read(self) -> LeaseSnapshot | None:  # noqa: D102
        with self._locked():
            data = self._read_bytes()
        if data is None:
            return None
        try:
            record = json.loads(data)
            record = record if isinstance(record, dict) else None
        except ValueError:
            record = None
        return LeaseSnapshot(record, content_version(data))

    def create(self, record: dict[str, Any]) -> str | None:  # noqa: D102
        data = encode_record(record)
        with self._locked():
            tmp = self._write_temp(data)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                return None
            finally:
                tmp.unlink(missing_ok=True)
        return content_version(data)

    def replace(self, record: dict[str, Any], version: str) -> str | None:  # noqa: D102
        data = encode_record(record)
        with self._locked():
            current = self._read_bytes()
            if current is None or content_version(current) != version:
                return None
            tmp = self._write_temp(data)
            try:
                os.replace(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        return content_version(data)

    def delete(self, version: str) -> bool:  # noqa: D102
        with self._locked():
            current = self._read_bytes()
            if current is None or content_version(current) != version:
                return False
            self.path.unlink(missing_ok=True)
        return True

    # -- helpers ---------------------------------------------------------------------------
    def _read_bytes(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def _write_temp(self, data: bytes) -> Path:
        fd, name = tempfile.mkstemp(dir=self.folder, prefix=f".{LEASE_FILE}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Path(name)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the exclusive lock on ``lease.lock`` (closing the file releases it)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LeaseError(f"cannot open the run lease lock in {self.folder}: {exc}") from None
        try:
            self._lock(fd)
            yield
        finally:
            os.close(fd)

    def _lock(self, fd: int) -> None:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LeaseError(
                        f"{self.folder / LOCK_FILE} stayed locked for {LOCK_TIMEOUT_S:.0f}s "
                        "(another process is stuck changing the run lease)"
                    ) from None
                time.sleep(0.01)
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                if not self._warned_no_lock:  # creation stays atomic; take-overs may race
                    logger.warning("%s cannot be locked (%s); continuing without", self.folder, exc)
                    self._warned_no_lock = True
                return
