"""What every rlpipe worker does when its process starts."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from rl_core.config import RLPipeConfig, validate_config

logger = logging.getLogger(__name__)


class WorkerBase:
    """Common start-up of a worker: thread limits, CPU pinning, config, seeding.

    Args:
        config: The resolved config as a plain dict (validated again in the worker).
        rank: Index of this worker in its group.
        cpus: CPU indices to pin this process to (ignored where unsupported).
    """

    group: str = "worker"
    #: Whether this worker reads or writes the run's checkpoint store (it then gets the
    #: store's credentials, see ``infra.worker_group.store_access_options``).
    opens_checkpoint_store: bool = False

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        from infra.extensions import load_extension_modules
        from infra.runtime_env import limit_threads

        limit_threads()
        load_extension_modules()
        if cpus and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, set(cpus))
            except OSError as exc:
                logger.warning("could not pin %s-%d to CPUs %s: %s", self.group, rank, cpus, exc)
        self.cfg: RLPipeConfig = validate_config(config, source=f"{self.group} worker")
        self.rank = rank

    def ping(self) -> int:
        """Liveness check; returns the process id (tests kill workers through it)."""
        return os.getpid()


def worker_seed(run_seed: int, group: str, rank: int) -> int:
    """Deterministic per-worker seed derived from the run seed."""
    offsets = {"env": 1_000, "rollout": 2_000, "actor": 3_000, "eval": 4_000}
    return run_seed * 100_003 + offsets.get(group, 9_000) + rank


class Stopwatch:
    """Measures worker compute time of a call (returned to the driver with results)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since creation."""
        return time.perf_counter() - self.start
