"""WorkerGroup: N Ray actors of one worker class, with liveness checks and respawn."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from infra.placement import GroupPlacement
from infra.runtime_env import store_access_env

logger = logging.getLogger(__name__)
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


def _remote(cls: type) -> Any:
    if cls not in _remote_classes:
        _remote_classes[cls] = ray.remote(cls)
    return _remote_classes[cls]


class WorkerGroup:
    """A named group of identical Ray actors.

    Args:
        name: Component name (``env``, ``rollout``, ``actor``...).
        cls: Worker class (a plain class; made remote here).
        size: Number of workers.
        placement: CPU set and per-worker reservation.
        make_args: ``rank -> positional constructor args`` (config, rank, cpus, ...).
    """

    def __init__(
        self,
        name: str,
        cls: type,
        size: int,
        placement: GroupPlacement,
        make_args: Callable[[int], tuple],
    ) -> None:
        self.name = name
        self.cls = cls
        self.placement = placement
        self.make_args = make_args
        self.handles = [self._spawn(rank) for rank in range(size)]

    def _spawn(self, rank: int) -> Any:
        return (
            _remote(self.cls)
            .options(
                num_cpus=self.placement.num_cpus_per_worker,
                max_restarts=0,
                max_task_retries=0,
                **store_access_options(self.cls, self.make_args(rank)),
            )
            .remote(*self.make_args(rank))
        )

    def __len__(self) -> int:
        return len(self.handles)

    def __getitem__(self, rank: int) -> Any:
        return self.handles[rank]

    def call(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``method`` on every worker; returns ObjectRefs."""
        return [getattr(h, method).remote(*args, **kwargs) for h in self.handles]

    def call_sync(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``method`` on every worker and wait for the results."""
        return ray.get(self.call(method, *args, **kwargs))

    def wait_started(self, timeout: float = 600.0) -> list[int]:
        """Wait until every worker has finished ``__init__``; returns their process ids.

        Args:
            timeout: Seconds to wait for each worker (it may be waiting for free CPUs).

        Raises:
            WorkerStartError: A worker's constructor raised; the message names the group,
                the rank and the original exception (e.g. an extension module that failed
                to import inside the worker). Also when a worker did not start in time.
        """
        pids = []
        for rank, handle in enumerate(self.handles):
            try:
                pids.append(ray.get(handle.ping.remote(), timeout=timeout))
            except GetTimeoutError:
                raise WorkerStartError(
                    f"{self.name} worker {rank} did not start within {timeout:.0f}s: the "
                    f"cluster may lack the resources it reserves "
                    f"(num_cpus={self.placement.num_cpus_per_worker}); check "
                    "cluster.component_placement and the worker counts"
                ) from None
            except RayActorError as exc:
                if not getattr(exc, "actor_init_failed", False):
                    raise
                raise WorkerStartError(
                    f"{self.name} worker {rank} failed to start: {startup_failure_reason(exc)}"
                ) from None
        return pids

    def dead_ranks(self, timeout: float = 10.0) -> list[int]:
        """Ranks whose actor no longer answers."""
        dead = []
        for rank, handle in enumerate(self.handles):
            try:
                ray.get(handle.ping.remote(), timeout=timeout)
            except (RayActorError, GetTimeoutError):
                dead.append(rank)
        return dead

    def respawn(self, rank: int) -> Any:
        """Replace worker ``rank`` with a fresh actor (the old one is killed if alive)."""
        try:
            ray.kill(self.handles[rank], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        logger.warning("respawning %s worker %d", self.name, rank)
        self.handles[rank] = self._spawn(rank)
        return self.handles[rank]

    def shutdown(self) -> None:
        """Kill all workers of the group."""
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
