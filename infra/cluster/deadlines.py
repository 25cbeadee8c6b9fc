"""Waiting on Ray workers with a deadline, and heartbeat checks of the busy ones.

A step hands :func:`wait_for` the ObjectRefs it needs and the workers each depends on.
Results come back like ``ray.get`` (a worker's error, a dead process's ``RayActorError``,
is raised as soon as its ref resolves). When the deadline passes, or a busy worker stops
answering heartbeats, the workers still owing a result are killed and :class:`StepTimeout`
names them; ``WorkerGroup.dead_ranks`` then reports them and ``WorkerGroup.respawn``
replaces them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import ray

logger = logging.getLogger(__name__)


class StepTimeout(RuntimeError):
    """A step's workers did not answer in time; those that had not were killed.

    Attributes:
        step: The step (the ``timeouts`` field whose deadline applied).
        killed: What was killed, e.g. ``["env worker 0 (pid 1234)"]``.
    """

    def __init__(self, message: str, step: str, killed: list[str]) -> None:
        super().__init__(message)
        self.step = step
        self.killed = killed


@dataclass(frozen=True)
class Liveness:
    """How a waiting step checks that its busy workers are alive.

    Attributes:
        interval_s: Seconds between heartbeats to each worker that still owes a result.
        timeout_s: A heartbeat unanswered this long declares its worker dead.
    """

    interval_s: float = 5.0
    timeout_s: float = 30.0

    @classmethod
    def from_config(cls, timeouts: Any) -> Liveness:
        """From the ``timeouts`` config section."""
        return cls(timeouts.heartbeat_interval_s, timeouts.heartbeat_timeout_s)


class Group(Protocol):
    """What a wait needs from a group of workers (a ``WorkerGroup`` is one)."""

    name: str

    def heartbeat(self, rank: int) -> ray.ObjectRef:
        """A ref that resolves once worker ``rank`` answers."""
        ...

    def kill(self, rank: int) -> str:
        """Kill worker ``rank``; return what was killed, for :class:`StepTimeout`."""
        ...


class Owner(NamedTuple):
    """A worker a result is owed by: its group and rank."""

    group: Group
    rank: int

    def __str__(self) -> str:
        return f"{self.group.name} worker {self.rank}"


#: Who owes one ref: a worker, several (e.g. an env worker and the rollout worker it
#: queries), or none (a Ray task: cancelled with ``force=True`` on expiry).
Owners = Owner | Sequence[Owner] | None


def wait_for(
    refs: Sequence[ray.ObjectRef],
    owners: Sequence[Owners],
    timeout_s: float,
    step: str,
    liveness: Liveness | None = None,
) -> list[Any]:
    """Wait for ``refs`` with a deadline; returns their values in order.

    Args:
        refs: The results the step needs.
        owners: For each ref, the worker(s) it depends on (see :data:`Owners`).
        timeout_s: The step's deadline in seconds.
        step: Name of the ``timeouts`` field the deadline comes from (``rollout``...).
        liveness: Heartbeat settings (None: :class:`Liveness` defaults).

    Raises:
        StepTimeout: The deadline passed, or a worker owing a result did not answer a
            heartbeat within ``liveness.timeout_s``; those workers were killed first.
        ValueError: ``owners`` does not have one entry per ref.
    """
    if len(owners) != len(refs):
        raise ValueError(f"owners has {len(owners)} entries for {len(refs)} refs; give one per ref")
    owed = [_as_tuple(entry) for entry in owners]
    pending: dict[ray.ObjectRef, list[int]] = {}
    for index, ref in enumerate(refs):
        pending.setdefault(ref, []).append(index)
    values: list[Any] = [None] * len(refs)
    probes = _HeartbeatProbes(liveness or Liveness())
    deadline = time.monotonic() + timeout_s
    while pending:
        now = time.monotonic()
        if now >= deadline:
            _expire(
                f"{step} exceeded its deadline of {timeout_s:g} s (timeouts.{step})",
                step,
                pending,
                owed,
            )
        wait_s = min(deadline, probes.next_check) - now
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(wait_s, 0.0))
        for ref in ready:
            value = ray.get(ref)  # raises a worker's error (a dead process too) at once
            for index in pending.pop(ref):
                values[index] = value
        if pending and time.monotonic() >= probes.next_check:
            busy = {owner for ref in pending for i in pending[ref] for owner in owed[i]}
            late = probes.check(busy)
            if late:
                names = ", ".join(str(owner) for owner in late)
                reason = (
                    f"{step}: no heartbeat from {names} within {probes.liveness.timeout_s:g} s "
                    "(timeouts.heartbeat_timeout_s)"
                )
                _expire(reason, step, {}, [], late)
    return values


def _as_tuple(entry: Owners) -> tuple[Owner, ...]:
    if entry is None:
        return ()
    if isinstance(entry, Owner):
        return (entry,)
    return tuple(entry)


class _HeartbeatProbes:
    """Heartbeats in flight to busy workers, and which of them are overdue."""

    def __init__(self, liveness: Liveness) -> None:
        self.liveness = liveness
        self.next_check = time.monotonic() + liveness.interval_s
        self.sent: dict[Owner, tuple[ray.ObjectRef, float]] = {}

    def check(self, busy: set[Owner]) -> list[Owner]:
        """Forget answered heartbeats, send one to each busy worker without one in flight.

        Returns:
            Busy workers whose heartbeat has gone unanswered for ``liveness.timeout_s``.
        """
        now = time.monotonic()
        self.next_check = now + self.liveness.interval_s
        if self.sent:
            refs = [ref for ref, _ in self.sent.values()]
            answered = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
            self.sent = {o: sent for o, sent in self.sent.items() if sent[0] not in answered}
        timeout = self.liveness.timeout_s
        late = [o for o, (_, at) in self.sent.items() if o in busy and now - at >= timeout]
        for owner in busy.difference(self.sent):
            self.sent[owner] = (owner.group.heartbeat(owner.rank), now)
        return sorted(late, key=lambda o: (o.group.name, o.rank))


def _expire(
    reason: str,
    step: str,
    pending: dict[ray.ObjectRef, list[int]],
    owed: list[tuple[Owner, ...]],
    workers: Sequence[Owner] = (),
) -> None:
    """Kill ``workers`` and the owners of the ``pending`` refs, then raise StepTimeout."""
    owing = (owner for indices in pending.values() for i in indices for owner in owed[i])
    targets = list(dict.fromkeys([*workers, *owing]))
    killed = [target.group.kill(target.rank) for target in targets]
    tasks = [ref for ref, indices in pending.items() if not any(owed[i] for i in indices)]
    for ref in tasks:
        ray.cancel(ref, force=True)
    if tasks:
        killed.append(f"{len(tasks)} Ray task(s) (cancelled)")
    message = f"{reason}; killed {', '.join(killed) or 'nothing'}"
    logger.error(message)
    raise StepTimeout(message, step, killed)
