"""What every rlpipe worker does when its process starts."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import ray

from infra.cluster.devices import DeviceReport, assigned_device, device_report
from infra.processes import process_start_time
from rl_core.config import RLPipeConfig, validate_config

logger = logging.getLogger(__name__)
_Method = TypeVar("_Method", bound=Callable[..., Any])


def step_method(method: _Method) -> _Method:
    """Mark a worker method as (part of) a pipeline step: an armed fault fires at its start.

    See :meth:`WorkerBase.arm_fault` and ``RLPIPE_FAULTS`` (docs/reliability.md).
    """

    @functools.wraps(method)
    def wrapper(self: WorkerBase, *args: Any, **kwargs: Any) -> Any:
        armed = self.__dict__.pop("_armed_fault", None)
        if armed is None:
            return method(self, *args, **kwargs)
        from infra.cluster.worker_faults import fault_scope

        where = f"{self.group} worker {self.rank} {method.__name__} ({armed[1]})"
        with fault_scope(armed[0], where):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


#: Ray concurrency group of control calls (``heartbeat``): a thread of its own, so they are
#: answered while a step method runs. Step methods stay in Ray's default group: one call at
#: a time, always on the same thread (training state is not thread-safe).
CONTROL_GROUP = "control"
#: ``concurrency_groups`` a worker actor is created with (``WorkerGroup`` does this).
CONCURRENCY_GROUPS: dict[str, int] = {CONTROL_GROUP: 1}


@dataclass(frozen=True)
class WorkerProcess:
    """The process of a worker, named so that exactly it can be killed.

    Attributes:
        pid: Process id on its node.
        node_id: Ray node the process runs on.
        start_time: Process start time in clock ticks since boot (None where unknown); a
            reused pid has another one.
    """

    pid: int
    node_id: str
    start_time: int | None


#: The config class of a worker's kind.
C = TypeVar("C", bound=RLPipeConfig)


class WorkerBase(Generic[C]):
    """Common start-up of a worker: thread limits, CPU pinning, config, device.

    Generic in the config class of the kind it serves (``WorkerBase[EmbodiedConfig]``), so
    ``self.cfg`` has that kind's sections.

    Every worker answers ``heartbeat`` (on the control thread, see :data:`CONTROL_GROUP`)
    and ``ping``.

    Args:
        config: The resolved config as a plain dict (validated again in the worker).
        rank: Index of this worker in its group.
        cpus: CPU indices to pin this process to (ignored where unsupported).
    """

    group: str = "worker"
    #: Whether this worker reads or writes the run's checkpoint store (it then gets the
    #: store's credentials, see ``infra.cluster.worker_group.store_access_options``).
    opens_checkpoint_store: bool = False

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        from infra.cluster.runtime_env import limit_threads
        from infra.extensions import load_extension_modules

        limit_threads()
        load_extension_modules()
        if cpus and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, set(cpus))
            except OSError as exc:
                logger.warning("could not pin %s-%d to CPUs %s: %s", self.group, rank, cpus, exc)
        self.cfg: C = cast(C, validate_config(config, source=f"{self.group} worker"))
        self.rank = rank
        #: The device Ray assigned this process (the CPU when it reserved no GPU).
        self.device = assigned_device(f"{self.group} worker {rank}")

    def device_report(self) -> DeviceReport:
        """Where this worker runs (node, GPU ids, ``CUDA_VISIBLE_DEVICES``, torch device)."""
        return device_report(self.group, self.rank, self.device)

    def ping(self) -> int:
        """Liveness check; returns the process id (tests kill workers through it)."""
        return os.getpid()

    def arm_fault(self, kind: str, name: str) -> None:
        """Fire fault ``kind`` (``raise``/``kill``/``hang``) when the next step method starts."""
        self._armed_fault = (kind, name)

    def heartbeat(self) -> WorkerProcess:
        """Liveness answer that does not wait for a running step.

        Call it in the control group (``handle.heartbeat.options(concurrency_group=
        CONTROL_GROUP)``) of an actor created with :data:`CONCURRENCY_GROUPS`; it reads no
        training state.
        """
        process = getattr(self, "_process", None)
        if process is None:
            pid = os.getpid()
            node = ray.get_runtime_context().get_node_id()
            process = self._process = WorkerProcess(pid, node, process_start_time(pid))
        return process


class Stopwatch:
    """Measures worker compute time of a call (returned to the driver with results)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since creation."""
        return time.perf_counter() - self.start


class Pending:
    """A constructor argument another worker is still computing.

    Ray waits for an ``ObjectRef`` argument before it even starts the worker process; one
    held inside this wrapper is passed as it is, so the process starts (and imports torch)
    while the value is computed, and the constructor waits for it with :func:`resolve`.

    Args:
        ref: The ``ObjectRef`` of the value.
    """

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def get(self, timeout: float | None = None) -> Any:
        """The value (waits for it)."""
        return ray.get(self.ref, timeout=timeout)


def resolve(value: Any) -> Any:
    """``value``, or the value a :class:`Pending` stands for."""
    return value.get() if isinstance(value, Pending) else value
