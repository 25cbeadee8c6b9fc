"""WorkerGroup: N Ray actors of one worker class, with deadlines, heartbeats and respawn."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from infra.cluster import worker_output
from infra.cluster.deadlines import Liveness, Owner, StepTimeout, wait_for
from infra.cluster.dispatch import method_spec, public_methods
from infra.cluster.group_calls import GroupMethod
from infra.cluster.placement import GroupPlacement
from infra.cluster.runtime_env import store_access_env
from infra.cluster.worker_base import CONCURRENCY_GROUPS, CONTROL_GROUP, WorkerProcess
from infra.processes import kill_process, wait_gone

__all__ = ["Liveness", "Owner", "StepTimeout", "WorkerGroup", "WorkerStartError", "wait_for"]

logger = logging.getLogger(__name__)
#: Seconds to ask a worker whose process was never recorded for its id before killing it.
_PROBE_TIMEOUT_S = 2.0
_remote_classes: dict[type, Any] = {}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class WorkerStartError(RuntimeError):
    """A worker's constructor raised (bad extension module, env or model): the run stops."""


def startup_failure_reason(error: RayActorError) -> str:
    """The original exception line of an actor whose ``__init__`` raised.

    Ray reports it as the last line of the remote traceback inside the error message.
    """
    text = _ANSI.sub("", getattr(error, "error_msg", "") or str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def store_access_options(cls: type, args: tuple) -> dict[str, Any]:
    """Ray options that give a worker the credentials of the run's checkpoint store.

    Only worker classes with ``opens_checkpoint_store`` (the trainers, which save and load
    checkpoints) get them, and only when the run's ``run.checkpoint_uri`` names a remote
    store (``s3://``); workers receive the run's config dict as their first argument.
    """
    config = args[0] if args and isinstance(args[0], dict) else {}
    if not getattr(cls, "opens_checkpoint_store", False):
        return {}
    env = store_access_env((config.get("run") or {}).get("checkpoint_uri"))
    return {"runtime_env": {"env_vars": env}} if env else {}


def merge_actor_options(*parts: dict[str, Any]) -> dict[str, Any]:
    """Ray actor options from several sources; their ``runtime_env`` env vars are merged."""
    options: dict[str, Any] = {}
    env_vars: dict[str, str] = {}
    for part in parts:
        for key, value in part.items():
            if key == "runtime_env":
                env_vars.update(value.get("env_vars", {}))
            else:
                options[key] = value
    if env_vars:
        options["runtime_env"] = {"env_vars": env_vars}
    return options


def _remote(cls: type) -> Any:
    if cls not in _remote_classes:
        _remote_classes[cls] = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(cls)
    return _remote_classes[cls]


class WorkerGroup:
    """A named group of identical Ray actors.

    Workers answer ``heartbeat`` on a control thread of their own, so a worker busy in a
    long step is not mistaken for a dead one; their step methods still run one at a time.

    The worker class's methods are attributes of the group (:class:`GroupMethod`), split
    across the ranks and reduced as the class declares them (:func:`worker_method
    <infra.cluster.dispatch.worker_method>`): ``group.update(it, within=("update", 60.0))``
    waits with the ``update`` step's deadline, ``group.update.remote(it)`` returns a
    :class:`~infra.cluster.group_calls.Handle` whose ``get`` waits.

    Args:
        name: Component name (``env``, ``rollout``, ``actor``...).
        cls: Worker class (a plain subclass of ``WorkerBase``; made remote here).
        size: Number of workers.
        placement: Where the workers run: CPU set or GPU bundles, per-worker reservations.
        make_args: ``rank -> positional constructor args`` (config, rank, cpus, ...).
        liveness: Heartbeat interval and timeout (``Liveness.from_config(cfg.timeouts)``;
            None: the defaults).
        tensor_parallel: Ranks per data-parallel replica (tensor-parallel peers get the same
            rows in a ``REPLICA_ROWS`` split).

    Raises:
        ValueError: ``size`` is not a multiple of ``tensor_parallel``.
    """

    def __init__(
        self,
        name: str,
        cls: type,
        size: int,
        placement: GroupPlacement,
        make_args: Callable[[int], tuple],
        liveness: Liveness | None = None,
        tensor_parallel: int = 1,
    ) -> None:
        if tensor_parallel < 1 or size % tensor_parallel:
            raise ValueError(
                f"{size} {name} workers do not split into replicas of {tensor_parallel} ranks"
            )
        self.name = name
        self.tensor_parallel = tensor_parallel
        self.cls = cls
        self.placement = placement
        self.make_args = make_args
        self.liveness = liveness or Liveness()
        #: When the newest worker was spawned (``time.monotonic()``).
        self.spawned_at = time.monotonic()
        self.handles = [self._spawn(rank) for rank in range(size)]
        #: Each worker's process, recorded by ``wait_started`` (None until then).
        self.processes: list[WorkerProcess | None] = [None] * size

    def _spawn(self, rank: int) -> Any:
        self.spawned_at = time.monotonic()
        args = self.make_args(rank)
        options = merge_actor_options(
            self.placement.actor_options(rank), store_access_options(self.cls, args)
        )
        return (
            _remote(self.cls).options(max_restarts=0, max_task_retries=0, **options).remote(*args)
        )

    def __len__(self) -> int:
        return len(self.handles)

    def __getitem__(self, rank: int) -> Any:
        return self.handles[rank]

    def __getattr__(self, name: str) -> GroupMethod:
        """Worker method ``name`` of every rank (see :class:`GroupMethod`).

        Raises:
            AttributeError: The worker class has no such method (the message lists those
                it has).
        """
        cls = self.__dict__.get("cls")
        if cls is None or name.startswith("_"):
            raise AttributeError(name)
        methods = public_methods(cls)
        if name not in methods:
            raise AttributeError(
                f"{cls.__name__} (worker group {self.__dict__.get('name')!r}) has no method "
                f"{name!r}; its methods: {', '.join(methods)}"
            )
        return GroupMethod(self, name, method_spec(cls, name))

    def heartbeat(self, rank: int) -> ray.ObjectRef:
        """Ask worker ``rank`` for a heartbeat (answered even while a step runs)."""
        return self.handles[rank].heartbeat.options(concurrency_group=CONTROL_GROUP).remote()

    def owners(self, ranks: Sequence[int] | None = None) -> list[Owner]:
        """The workers ``ranks`` (default: all) as owners of refs for :func:`wait_for`."""
        return [Owner(self, rank) for rank in (range(len(self)) if ranks is None else ranks)]

    def get(
        self,
        refs: Sequence[ray.ObjectRef],
        timeout_s: float,
        step: str,
        ranks: Sequence[int] | None = None,
    ) -> list[Any]:
        """``ray.get`` with a deadline for refs owed by workers of this group.

        Args:
            refs: One ref per worker in ``ranks`` (e.g. a ``Handle``'s ``refs``).
            timeout_s: The step's deadline in seconds (e.g. ``cfg.timeouts.rollout``).
            step: Name of the ``timeouts`` field the deadline comes from.
            ranks: The worker each ref belongs to (default: ref i to worker i).

        Raises:
            StepTimeout: The deadline passed or a busy worker stopped answering heartbeats;
                the workers that had not answered were killed (see :func:`wait_for`).
        """
        return wait_for(refs, self.owners(ranks), timeout_s, step, self.liveness)

    def wait_started(self, timeout: float = 600.0) -> list[int]:
        """Wait until every worker has finished ``__init__``; returns their process ids.

        The processes are recorded (:attr:`processes`) so that :meth:`kill` can find them.

        Args:
            timeout: Seconds to wait for each worker (it may be waiting for free CPUs;
                ``cfg.timeouts.worker_start``).

        Raises:
            WorkerStartError: A worker's constructor raised; the message names the group,
                the rank and the original exception (e.g. an extension module that failed
                to import inside the worker). Also when a worker did not start in time.
        """
        pids = []
        for rank in range(len(self)):
            try:
                process = ray.get(self.heartbeat(rank), timeout=timeout)
            except GetTimeoutError:
                raise WorkerStartError(
                    f"{self.name} worker {rank} did not start within {timeout:.0f}s: the "
                    f"cluster may lack the resources it reserves "
                    f"(num_cpus={self.placement.num_cpus_per_worker}, "
                    f"num_gpus={self.placement.num_gpus_per_worker}); check "
                    "cluster.component_placement and the worker counts"
                ) from None
            except Exception as exc:  # RayActorError (by attribute: see dead_ranks)
                if not getattr(exc, "actor_init_failed", False):
                    raise
                # keep the worker's traceback: Ray forwards it a moment after it died
                worker_output.wait_for_crash_dump(since=self.spawned_at)
                raise WorkerStartError(
                    f"{self.name} worker {rank} failed to start: {startup_failure_reason(exc)}"
                ) from None
            self.processes[rank] = process
            pids.append(process.pid)
        return pids

    def dead_ranks(self, timeout: float | None = None) -> list[int]:
        """Ranks whose worker is dead: its process is gone, or it missed a heartbeat.

        All workers are asked at once. A worker busy in a step still answers (heartbeats run
        on their own thread). A dead process fails its heartbeat as soon as Ray knows, so
        the call returns at once unless another worker is silent.

        Args:
            timeout: Seconds to wait for heartbeats (None: ``liveness.timeout_s``).
        """
        timeout = self.liveness.timeout_s if timeout is None else timeout
        refs = [self.heartbeat(rank) for rank in range(len(self))]
        answered = set(ray.wait(refs, num_returns=len(refs), timeout=timeout)[0])
        dead = []
        for rank, ref in enumerate(refs):
            if ref not in answered:
                dead.append(rank)
                continue
            try:
                self.processes[rank] = ray.get(ref)
            except Exception:  # noqa: BLE001 - any failed heartbeat: the worker is gone
                # (not only RayActorError: Ray can hand back an ActorDiedError whose class
                # was rebuilt from the object store, which an except clause does not match)
                dead.append(rank)
        if dead:
            logger.warning("%s workers %s are dead or did not answer a heartbeat", self.name, dead)
        return dead

    def kill(self, rank: int) -> str:
        """Kill worker ``rank``'s process now (SIGKILL by process id); respawn it afterwards.

        The process recorded by :meth:`wait_started` is signalled when it runs on this
        machine and is still the same process (pid and start time); otherwise Ray kills
        the actor. Returns what was killed, e.g. ``env worker 0 (pid 1234)``.
        """
        process = self.processes[rank] or self._probe_process(rank)
        label = f"{self.name} worker {rank}"
        if process is None:
            ray.kill(self.handles[rank], no_restart=True)
            return f"{label} (pid unknown)"
        here = process.node_id == ray.get_runtime_context().get_node_id()
        if here and kill_process(process.pid, process.start_time):
            if not wait_gone(process.pid, timeout=5.0):
                logger.warning("%s (pid %d) still runs after SIGKILL", label, process.pid)
        else:
            ray.kill(self.handles[rank], no_restart=True)
        return f"{label} (pid {process.pid})"

    def _probe_process(self, rank: int) -> WorkerProcess | None:
        ready, _ = ray.wait([self.heartbeat(rank)], timeout=_PROBE_TIMEOUT_S)
        try:
            return ray.get(ready[0]) if ready else None
        except Exception:  # noqa: BLE001 - gone (see dead_ranks)
            return None

    def respawn(self, rank: int) -> Any:
        """Replace worker ``rank`` with a fresh actor (the old one is killed if alive)."""
        try:
            ray.kill(self.handles[rank], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        logger.warning("respawning %s worker %d", self.name, rank)
        self.handles[rank] = self._spawn(rank)
        self.processes[rank] = None
        return self.handles[rank]

    def shutdown(self) -> None:
        """Kill all workers of the group."""
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
