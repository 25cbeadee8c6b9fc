"""Run lease: one writer per run name at a time.

A training process takes the lease of its run before it reads or writes anything of the
run (checkpoints, MLflow run), renews it from a daemon thread every ``ttl / 4`` seconds
while it trains, and releases it when it ends (also when it fails). A second process
asking for the same run's lease gets :class:`LeaseHeldError` naming the holder.

The lease lives next to the run's checkpoints, in its store: ``lease.json`` in a local
store folder (:mod:`infra.checkpoint.lease_local`), a ``lease.json`` object written with
S3 conditional requests in an ``s3://`` store (:mod:`infra.checkpoint.s3_lease`). A lease
is taken over only when its holder is provably gone: on the same host, its process id is
dead or now belongs to another process (its start time differs); from another host, the
lease was not renewed for longer than its TTL.
"""

from __future__ import annotations

import abc
import importlib
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.checkpoint.lease_holder import holder_record, holder_text, stale_reason, utc_now_iso

logger = logging.getLogger(__name__)

#: Name of the lease (file or object) in the run's store.
LEASE_FILE = "lease.json"
DEFAULT_TTL_S = 60.0
#: Create/take-over rounds before giving up when other processes keep winning the race.
ACQUIRE_ROUNDS = 5


class LeaseError(RuntimeError):
    """The run lease cannot be taken, kept or read."""


class LeaseHeldError(LeaseError):
    """Another live process holds the run's lease.

    Attributes:
        holder: The holder's record (host, pid, Prefect flow run, timestamps).
    """

    def __init__(self, run_name: str, holder: dict[str, Any]) -> None:
        self.run_name = run_name
        self.holder = holder
        super().__init__(
            f"run {run_name!r} is being trained by {holder_text(holder)}; "
            "wait for it to finish or stop it"
        )


class LeaseLostError(LeaseError):
    """This process no longer holds the run's lease (another process took the run over)."""


@dataclass(frozen=True)
class LeaseSnapshot:
    """A lease as read from its store.

    Attributes:
        record: The holder record (None when the stored bytes are not a valid record).
        version: Opaque version (content hash, S3 ETag) for the conditional writes.
        age_s: Seconds since the holder last wrote it, or None to judge by ``renewed_at``.
    """

    record: dict[str, Any] | None
    version: str
    age_s: float | None = None


class LeaseBackend(abc.ABC):
    """Atomic create / compare-and-replace / compare-and-delete of one lease record."""

    uri: str

    @abc.abstractmethod
    def read(self) -> LeaseSnapshot | None:
        """The current lease, or None when there is none."""

    @abc.abstractmethod
    def create(self, record: dict[str, Any]) -> str | None:
        """Write ``record`` if no lease exists; its version, or None if one exists."""

    @abc.abstractmethod
    def replace(self, record: dict[str, Any], version: str) -> str | None:
        """Write ``record`` if the lease is still at ``version``; the new version or None."""

    @abc.abstractmethod
    def delete(self, version: str) -> bool:
        """Remove the lease if it is still at ``version``; whether it was removed."""


#: Store URI scheme -> lease backend (callable taking the store URI, or "module:attribute"
#: imported on first use). URIs without a scheme are local folders.
_BACKENDS: dict[str, str | Callable[[str], LeaseBackend]] = {
    "": "infra.checkpoint.lease_local:LocalLeaseBackend",
    "s3": "infra.checkpoint.s3_lease:S3LeaseBackend",
}


def register_lease_backend(scheme: str, factory: str | Callable[[str], LeaseBackend]) -> None:
    """Make :func:`open_lease_backend` use ``factory`` for ``<scheme>://`` stores.

    Args:
        scheme: URI scheme without ``://`` (case-insensitive; ``""`` for local folders).
        factory: A callable taking the store URI, or ``"module:attribute"`` naming one.
    """
    _BACKENDS[scheme.lower()] = factory


def open_lease_backend(store_uri: str) -> LeaseBackend:
    """The lease backend of the checkpoint store at ``store_uri``.

    Raises:
        LeaseError: No lease backend for the URI's scheme.
    """
    scheme, sep, _ = store_uri.partition("://")
    factory = _BACKENDS.get(scheme.lower() if sep else "")
    if factory is None:
        known = ", ".join(f"{s}://" for s in sorted(_BACKENDS) if s)
        raise LeaseError(
            f"no run lease for checkpoint store {store_uri!r}: use a local path or one of {known}"
        )
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(store_uri)


class RunLease:
    """The lease of one run: acquire, renew in the background, release.

    Args:
        store_uri: The run's checkpoint store (local folder or ``s3://...``).
        run_name: The run's name (for messages and the record).
        ttl_s: Seconds without renewal after which another host may take the lease over;
            it is renewed every ``ttl_s / 4`` seconds.
        backend: Where the lease lives (default: chosen by the store URI's scheme).
    """

    def __init__(
        self,
        store_uri: str,
        run_name: str,
        ttl_s: float = DEFAULT_TTL_S,
        backend: LeaseBackend | None = None,
    ) -> None:
        self.run_name = run_name
        self.ttl_s = float(ttl_s)
        self.backend = backend or open_lease_backend(store_uri)
        self.lease_id = uuid.uuid4().hex
        self.record: dict[str, Any] | None = None
        self._version: str | None = None
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def uri(self) -> str:
        """Where the lease is stored."""
        return self.backend.uri

    @property
    def held(self) -> bool:
        """Whether this process holds the lease now (as far as it knows)."""
        return self._version is not None and self._lost is None

    # -- acquire ---------------------------------------------------------------------------
    def acquire(self) -> RunLease:
        """Take the lease and start renewing it.

        Returns:
            This lease.

        Raises:
            LeaseHeldError: A live process holds it.
            LeaseError: The lease cannot be read or written.
        """
        record = holder_record(self.run_name, self.lease_id, self.ttl_s)
        snapshot: LeaseSnapshot | None = None
        for _ in range(ACQUIRE_ROUNDS):
            version = self.backend.create(record)
            if version is not None:
                return self._start(record, version)
            snapshot = self.backend.read()
            if snapshot is None:
                continue  # released between our create and read
            current = self._readable(snapshot)
            if current.get("lease_id") == self.lease_id:  # our own write, retried
                return self._start(current, snapshot.version)
            reason = stale_reason(current, snapshot.age_s, self.ttl_s)
            if reason is None:
                raise LeaseHeldError(self.run_name, current)
            version = self.backend.replace(record, snapshot.version)
            if version is not None:
                logger.warning(
                    "took over the lease of run %r from %s: %s",
                    self.run_name,
                    holder_text(current),
                    reason,
                )
                return self._start(record, version)
        holder = snapshot.record if snapshot and snapshot.record else {}
        raise LeaseHeldError(self.run_name, holder)

    def _readable(self, snapshot: LeaseSnapshot) -> dict[str, Any]:
        if snapshot.record is None:
            raise LeaseError(
                f"run lease {self.uri} is unreadable; if no process trains run "
                f"{self.run_name!r}, delete it and start again"
            )
        return snapshot.record

    def _start(self, record: dict[str, Any], version: str) -> RunLease:
        with self._lock:
            self.record, self._version, self._lost = record, version, None
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"run-lease-{self.run_name}", daemon=True
        )
        self._thread.start()
        logger.info(
            "holding the lease of run %r (%s, renewed every %.0fs)",
            self.run_name,
            self.uri,
            self.ttl_s / 4,
        )
        return self

    # -- renew -----------------------------------------------------------------------------
    def renew(self) -> None:
        """Rewrite the lease with a fresh ``renewed_at``.

        Raises:
            LeaseLostError: Another process holds the lease now.
            LeaseError: The lease cannot be written (e.g. the store is unreachable).
        """
        with self._lock:
            if self._version is None or self.record is None:
                raise LeaseLostError(f"the lease of run {self.run_name!r} is not held")
            self.check()
            record = {**self.record, "renewed_at": utc_now_iso()}
            version = self.backend.replace(record, self._version)
            if version is None:  # changed under us: our retried write, or someone else's
                snapshot = self.backend.read()
                mine = snapshot and snapshot.record and snapshot.record.get("lease_id")
                if mine != self.lease_id:
                    holder = holder_text(snapshot.record) if snapshot and snapshot.record else ""
                    self._lost = f"taken over by {holder}" if holder else "deleted or overwritten"
                    self.check()
                record, version = snapshot.record, snapshot.version
            self.record, self._version = record, version

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                self.renew()
            except LeaseLostError as exc:
                logger.error("%s; this process must stop writing the run", exc)
                return
            except Exception as exc:  # noqa: BLE001 - keep trying until the TTL runs out
                logger.warning("could not renew the lease of run %r: %s", self.run_name, exc)

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if another process took the lease over."""
        if self._lost is not None:
            raise LeaseLostError(
                f"the lease of run {self.run_name!r} ({self.uri}) was {self._lost}"
            )

    # -- release ---------------------------------------------------------------------------
    def release(self) -> None:
        """Stop renewing and delete the lease if this process still holds it.

        Never raises: a lease that cannot be deleted is logged and taken over later (same
        host: at once, the process being gone; another host: after its TTL).
        """
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        with self._lock:
            version, self._version = self._version, None
            if version is None or self._lost is not None:
                return
            try:
                if not self.backend.delete(version):
                    logger.warning("the lease of run %r changed before release", self.run_name)
            except Exception as exc:  # noqa: BLE001 - release runs in finally blocks
                logger.warning(
                    "could not release the lease of run %r (%s): %s", self.run_name, self.uri, exc
                )

    def __enter__(self) -> RunLease:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()
