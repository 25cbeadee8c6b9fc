"""Fault injection (``RLPIPE_FAULTS``): arm the worker doing a step, or fire in the driver.

The driver holds the :class:`~rl_core.reliability.FaultPlan`. Before a step's work starts,
the step machinery (``StepRuntime.arm_fault``) asks the runtime where the step's fault
strikes (``StepRuntime.fault_target``) and :meth:`FaultInjector.arm` hands a planned fault
to that worker (``arm_fault``); the worker fires it when its next step method starts
(:func:`fire`). Stateless fan-out work (Ray tasks, :data:`FIRST_FANOUT_JOB`) gets the fault
as an argument together with a one-shot token file, so a Ray or Prefect retry of the same
task does not fire it again. ``kill_driver`` and ``exit`` fire in the driver itself.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import weakref
from pathlib import Path
from typing import Any

import ray

from infra.cluster.worker_faults import fire
from rl_core.reliability import Fault, FaultPlan, parse_faults

logger = logging.getLogger(__name__)
ENV_VAR = "RLPIPE_FAULTS"
WORKER_KINDS = ("raise", "kill", "hang", "disk_full")
DRIVER_KINDS = ("kill_driver", "exit")


class _FirstFanoutJob:
    """The fault target of a step whose fault strikes its first fan-out job (a Ray task)."""

    def __repr__(self) -> str:
        return "FIRST_FANOUT_JOB"


#: A step's fault target that is no worker: the step's first fan-out job (a Ray task).
FIRST_FANOUT_JOB = _FirstFanoutJob()


class RunAbortedByFault(RuntimeError):
    """An ``exit`` fault: the train flow fails here without retrying."""


def fire_once(fault: dict[str, str] | None, where: str) -> None:
    """Fire a fault handed to a Ray task unless its token was already taken.

    Args:
        fault: ``{"kind", "token"}`` from :meth:`FaultInjector.task_fault`, or None.
        where: What is failing.
    """
    if not fault:
        return
    try:
        os.close(os.open(fault["token"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # a retry of the same task: the fault already fired
    fire(fault["kind"], where)


class FaultInjector:
    """The driver's view of a run's fault plan.

    Args:
        plan: Faults to inject (an empty plan injects nothing).
    """

    def __init__(self, plan: FaultPlan | None = None) -> None:
        self.plan = plan or FaultPlan()
        self._tokens = Path(tempfile.mkdtemp(prefix="rlpipe-faults-")) if self.plan else None
        if self._tokens is not None:  # removed with the injector (or at interpreter exit)
            weakref.finalize(self, shutil.rmtree, self._tokens, True)

    @classmethod
    def from_env(cls, enabled: bool = True) -> FaultInjector:
        """The plan in ``RLPIPE_FAULTS`` (none when ``enabled`` is False, e.g. on resume)."""
        text = os.environ.get(ENV_VAR, "")
        plan = parse_faults(text) if enabled else FaultPlan()
        if plan:
            logger.warning("fault injection on: %s", ", ".join(str(f) for f in plan.faults))
        elif text and not enabled:
            logger.info("%s is ignored: this run resumed from a checkpoint", ENV_VAR)
        return cls(plan)

    def arm(self, step: str, iteration: int, worker: Any) -> Fault | None:
        """Hand the fault planned at ``step`` of ``iteration`` (if any) to ``worker``."""
        if not self.plan:
            return None
        fault = self.plan.take(step, iteration, WORKER_KINDS)
        if fault is not None:
            ray.get(worker.arm_fault.remote(fault.kind, str(fault)))
        return fault

    def task_fault(self, step: str, iteration: int) -> dict[str, str] | None:
        """The fault planned at ``step`` as an argument for a Ray task (one-shot token)."""
        if not self.plan:
            return None
        fault = self.plan.take(step, iteration, WORKER_KINDS)
        if fault is None:
            return None
        token = self._tokens / f"{fault.kind}-{fault.step}-{fault.iteration}"
        return {"kind": fault.kind, "token": str(token), "name": str(fault)}

    def driver(self, step: str, iteration: int) -> None:
        """Fire a ``kill_driver`` or ``exit`` fault planned at ``step`` in this process."""
        if not self.plan:
            return
        fault = self.plan.take(step, iteration, DRIVER_KINDS)
        if fault is None:
            return
        logger.warning("injected fault %s in the driver (pid %d)", fault, os.getpid())
        if fault.kind == "exit":
            raise RunAbortedByFault(f"injected fault {fault}: the run fails here")
        os.kill(os.getpid(), signal.SIGKILL)
