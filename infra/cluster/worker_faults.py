"""The faults a worker carries out (``RLPIPE_FAULTS``), armed by the driver.

A worker fires its armed fault when its next step method starts (:func:`fault_scope`); a
Ray task fires the fault handed to it (``infra.driver.faults.fire_once``).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)
#: What a process may still write during a ``disk_full`` fault: larger files fail (EFBIG).
DISK_FULL_FILE_BYTES = 1024


class InjectedFault(RuntimeError):
    """The exception a ``raise`` fault throws inside a worker."""


def fire(kind: str, where: str) -> None:
    """Carry out a fault in this process.

    Args:
        kind: ``raise``, ``kill`` or ``hang``.
        where: What is failing (for the log and the exception).
    """
    logger.warning("injected fault %s in %s (pid %d)", kind, where, os.getpid())
    if kind == "raise":
        raise InjectedFault(f"injected fault: raise in {where}")
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # not reached: SIGKILL cannot be handled
    if kind == "hang":
        threading.Event().wait()  # until the step's deadline kills this process
    raise ValueError(f"unknown fault kind {kind!r}")


@contextmanager
def fault_scope(kind: str, where: str) -> Iterator[None]:
    """Carry out a fault around the step it strikes.

    ``disk_full`` lowers this process's file-size limit (``RLIMIT_FSIZE``) for the step, so
    its writes fail as on a full disk (``OSError`` EFBIG: Python ignores ``SIGXFSZ``); the
    other kinds fire at the step's start (:func:`fire`).

    Args:
        kind: ``raise``, ``kill``, ``hang`` or ``disk_full``.
        where: What is failing (for the log and the exception).
    """
    if kind != "disk_full":
        fire(kind, where)
        yield
        return
    logger.warning("injected fault %s in %s (pid %d)", kind, where, os.getpid())
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (DISK_FULL_FILE_BYTES, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
