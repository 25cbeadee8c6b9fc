"""Saving and loading a checkpoint from its declared parts.

A runtime declares what its checkpoint holds as a list of parts
(:meth:`~infra.driver.step_runtime.StepRuntime.checkpoint_parts`):

- :class:`~infra.checkpoint.layout.StatePart`: state the driver holds or gathers from its
  workers, written by the driver as one file (:func:`~infra.checkpoint.layout.write_file`);
- :class:`WorkerPart`: a worker group whose ranks write their own files in their own
  processes (``save_checkpoint(store_uri, folder)`` / ``load_checkpoint(store_uri,
  folder)``: trainer weights, sharded DCP folders, the replay buffer), through the same
  layout module.

:func:`save_parts` and :func:`load_parts` are the one walk over them. Saving: worker parts
that write :attr:`SaveOrder.ALONGSIDE` are started, :attr:`SaveOrder.BEFORE` ones are
saved, then the state parts are gathered in the declared order (gathering one may change
a later one: settling a pipeline puts back the prompt cursor or env states), the started
worker parts are waited for (a trainer refusing non-finite weights stops the save before
any driver file is written), the state parts are written in the declared order, and the
:attr:`SaveOrder.AFTER` worker parts save last. Loading: every state part's file is read
and verified and every sharded folder's signature checked before any worker loads
anything, the worker parts load in order, then the state parts are put back in reverse
order (a part may read the state of one declared after it, e.g. the prompt cursor).

The caller writes ``COMPLETE`` and commits the manifest after :func:`save_parts`
(:mod:`infra.checkpoint.commit`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.checkpoint.layout import ACTOR_DCP, StatePart, read_part, write_file
from infra.checkpoint.store import CheckpointStore, open_store

#: The step name worker calls of a checkpoint run under (their deadline and errors).
CHECKPOINT_STEP = "checkpoint"


class SaveOrder(enum.Enum):
    """When a worker part's ranks save, relative to the driver's state parts."""

    #: Saved (and waited for) before the state parts are gathered.
    BEFORE = "before"
    #: Started first: the ranks write while the driver gathers its state parts; waited for
    #: before any driver file is written.
    ALONGSIDE = "alongside"
    #: Saved after the driver's files are written.
    AFTER = "after"


@dataclass(frozen=True)
class WorkerPart:
    """A worker group whose ranks save and load their own state in their processes.

    Attributes:
        group: The :class:`~infra.cluster.worker_group.WorkerGroup` (its workers have
            ``save_checkpoint(store_uri, folder)`` and ``load_checkpoint(store_uri,
            folder)``).
        order: When its ranks save (:class:`SaveOrder`).
        saves: Whether a checkpoint holds it now (loading always asks the workers, which
            start empty from a folder without their files).
        sharded: Its ranks write a signed DCP folder (:data:`~infra.checkpoint.layout.
            ACTOR_DCP`), whose signature the driver checks before any rank loads.
    """

    group: Any
    order: SaveOrder = SaveOrder.BEFORE
    saves: bool = True
    sharded: bool = False

    @property
    def name(self) -> str:
        """The group's name (keys the workers' results)."""
        return str(self.group.name)


#: One declared part of a checkpoint.
CheckpointPart = StatePart | WorkerPart


def save_parts(
    store_uri: str, folder: str, parts: Sequence[CheckpointPart], timeout: float | None
) -> dict[str, list[Any]]:
    """Write every part of a checkpoint into ``folder`` (not committed).

    Args:
        store_uri: The run's store.
        folder: The step folder.
        parts: The declared parts, in order.
        timeout: Seconds each worker call may take (``timeouts.checkpoint``).

    Returns:
        The results of each worker part's ranks, by group name.
    """
    store = open_store(store_uri)
    workers = [p for p in parts if isinstance(p, WorkerPart) and p.saves]
    states = [p for p in parts if isinstance(p, StatePart)]
    started = {
        p.name: p.group.save_checkpoint.remote(store_uri, folder)
        for p in workers
        if p.order is SaveOrder.ALONGSIDE
    }
    results: dict[str, list[Any]] = {}
    for part in (p for p in workers if p.order is SaveOrder.BEFORE):
        results[part.name] = _worker_call(part.group.save_checkpoint, store_uri, folder, timeout)
    values = [(part, part.get()) for part in states]
    for name, saving in started.items():
        results[name] = saving.get(within=(CHECKPOINT_STEP, timeout))
    write_states(store, folder, values)
    for part in (p for p in workers if p.order is SaveOrder.AFTER):
        results[part.name] = _worker_call(part.group.save_checkpoint, store_uri, folder, timeout)
    return results


def write_states(
    store: CheckpointStore, folder: str, values: Sequence[tuple[StatePart, Any]]
) -> None:
    """Write gathered state parts in order (a None value writes no file)."""
    for part, value in values:
        if value is not None:
            write_file(store, folder, part.file, part.codec, value)


def load_parts(
    store_uri: str,
    folder: str,
    step: int,
    parts: Sequence[CheckpointPart],
    timeout: float | None,
    trust: bool = False,
) -> dict[str, list[Any]]:
    """Restore every part from a committed checkpoint folder.

    Args:
        store_uri: The run's store.
        folder: The step folder.
        step: Its step (state parts that start over get it).
        parts: The declared parts, in the order they were saved.
        timeout: Seconds each worker call may take.
        trust: Accept pickled data without a valid signature of this user's key (logged).

    Returns:
        The results of each worker part's ranks, by group name.

    Raises:
        CheckpointError: A file is missing, malformed or not signed with this user's key
            (raised before any worker loads anything).
    """
    store = open_store(store_uri)
    states = [p for p in parts if isinstance(p, StatePart) and p.put is not None]
    workers = [p for p in parts if isinstance(p, WorkerPart)]
    values = [(part, read_part(store, folder, part, trust)) for part in states]
    for part in workers:
        if part.sharded:
            check_sharded(store, folder, trust)
    results = {
        part.name: _worker_call(part.group.load_checkpoint, store_uri, folder, timeout)
        for part in workers
    }
    for part, value in reversed(values):
        part.put(value, step)
    return results


def check_sharded(store: CheckpointStore, folder: str, trust: bool) -> None:
    """Verify the signed metadata of the folder's sharded trainer checkpoint, if local.

    (A store that is not local has no sharded checkpoints: the ranks refuse to write one.)
    """
    local = store.local_path(f"{folder}/{ACTOR_DCP}")
    if local is None:
        return
    from infra.checkpoint import signed_dcp  # torch.distributed: only runs that shard

    signed_dcp.check_folder(local, trust)


def _worker_call(method: Any, store_uri: str, folder: str, timeout: float | None) -> list[Any]:
    """``method`` of a worker group (``group.save_checkpoint``...) within the deadline."""
    return method(store_uri, folder, within=(CHECKPOINT_STEP, timeout))
