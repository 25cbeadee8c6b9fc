"""Ray workers' printed output, routed through the driver's logging.

Ray copies every line a worker prints to the driver's stdout and stderr, prefixed
``(EnvWorker pid=123)``. When a worker dies, that is its traceback, the C++ stack trace of
its abort and the list of loaded extension modules: about a hundred lines ahead of the one
clear error the driver reports. Once :func:`route_worker_output` is on (the CLI turns it
on), :func:`install` replaces Ray's printer: a worker's lines go to the ``rlpipe.workers``
logger, and the lines of a worker that crashed (from its first traceback or abort line on)
are detail records (:mod:`infra.log_detail`): in the run's log file, on the terminal only
with ``-v``. Other lines (prints, warnings) reach the terminal as before.

Ray forwards those lines from the workers' log files a moment after they are printed (seconds
on a busy machine): :func:`wait_for_crash_dump` lets a driver that is about to stop because a
worker died keep the worker's dump.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from infra.log_detail import DETAIL

logger = logging.getLogger("rlpipe.workers")
#: The name of Ray's printer in its standard-stream dispatcher.
RAY_PRINTER = "ray_print_logs"
#: Our printer's name there.
PRINTER = "rlpipe_worker_output"
#: A line that starts a crash dump: everything the worker prints from there is detail.
CRASH_MARKERS = (
    "Traceback (most recent call last)",
    "Exception raised in creation task",
    "Stack trace:",
    "*** SIGABRT",
    "*** SIGSEGV",
    "Fatal Python error",
    "Extension modules:",
    "The actor died",
)

_enabled = False
#: When (``time.monotonic()``) the newest crash dump began and the newest worker line arrived.
_arrivals = {"crash": float("-inf"), "line": float("-inf")}


def route_worker_output() -> None:
    """Route workers' output through logging, in the Ray session of now and later ones.

    :func:`restore` undoes it.
    """
    global _enabled
    _enabled = True
    install()


class WorkerOutputLogger:
    """Logs the worker lines Ray forwards (one batch of lines of one worker per call)."""

    def __init__(self) -> None:
        self._crashed: set[Any] = set()
        self._lock = threading.Lock()

    def __call__(self, data: dict[str, Any]) -> None:
        """Log a batch: ``lines``, ``pid``, ``is_err`` and the actor or task name."""
        pid = data.get("pid")
        lines = data.get("lines") or []
        if pid == "autoscaler":  # its event lines only, as Ray prints them
            from ray._private.worker import filter_autoscaler_events

            lines = list(filter_autoscaler_events(lines))
        prefix = f"({worker_label(data)}) " if pid not in ("raylet", "autoscaler") else ""
        for line in lines:
            with self._lock:
                if pid not in self._crashed and any(m in line for m in CRASH_MARKERS):
                    self._crashed.add(pid)
                    _arrivals["crash"] = time.monotonic()
                crashed = pid in self._crashed
            logger.info("%s%s", prefix, line, extra=DETAIL if crashed else None)
        _arrivals["line"] = time.monotonic()


def wait_for_crash_dump(since: float, timeout: float = 15.0, quiet: float = 1.0) -> bool:
    """Wait until the dump of a worker that crashed after ``since`` has reached the log.

    Call it before stopping because a worker died: it waits (at most ``timeout`` seconds) for
    the first line of a crash dump begun after ``since`` (``time.monotonic()``), then until
    the workers have printed nothing for ``quiet`` seconds (the dump's last lines: its abort
    stack and module list). Returns at once when worker output is not routed through logging
    (Ray then prints it itself).

    Returns:
        Whether such a dump arrived.
    """
    if not _enabled or not _printer_installed():
        return False
    deadline = time.monotonic() + timeout
    while _arrivals["crash"] < since:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    while time.monotonic() - _arrivals["line"] < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _printer_installed() -> bool:
    return PRINTER in _handler_names()


def _handler_names() -> list[str]:
    """Names of the printers in Ray's standard-stream dispatcher."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    return [name for name, _ in dispatcher.handlers]


def worker_label(data: dict[str, Any]) -> str:
    """``EnvWorker pid=123`` (Ray's prefix without the parentheses)."""
    name = data.get("actor_name") or data.get("task_name")
    return f"{name} pid={data.get('pid')}" if name else f"pid={data.get('pid')}"


def install() -> bool:
    """Swap Ray's printer for :class:`WorkerOutputLogger` when routing is on and Ray is up.

    Returns:
        Whether our printer is installed now.
    """
    if not _enabled:
        return False
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    names = _handler_names()
    if RAY_PRINTER in names:  # (each ray.init adds it again)
        dispatcher.remove_handler(RAY_PRINTER)
    elif PRINTER not in names:
        return False  # Ray is not connected yet (or prints nothing to this driver)
    if PRINTER not in names:
        dispatcher.add_handler(PRINTER, WorkerOutputLogger())
    return True


def restore() -> None:
    """Turn routing off and give the workers' output back to Ray's printer."""
    import functools

    import ray
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    from ray._private.worker import print_to_stdstream

    global _enabled
    _enabled = False
    names = _handler_names()
    if PRINTER not in names:
        return
    dispatcher.remove_handler(PRINTER)
    if ray.is_initialized() and RAY_PRINTER not in names:
        dispatcher.add_handler(
            RAY_PRINTER, functools.partial(print_to_stdstream, ignore_prefix=False)
        )
