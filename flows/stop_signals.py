"""SIGINT and SIGTERM stop a run the same way: after the current iteration, with a checkpoint.

Ctrl-C sends SIGINT; ``kill``, systemd, Kubernetes and container runtimes send SIGTERM. The
first of either sets :data:`~infra.driver.session.STOP_REQUESTED`: the run loop finishes the
iteration in progress (its steps stay exactly-once), commits a checkpoint, releases the
run's lease and returns; the CLI then marks the Prefect flow run Cancelled and exits with
128 + the signal number (130 for SIGINT, 143 for SIGTERM). A second signal aborts at once
(the run resumes from its last committed checkpoint).

Prefect's flow engine installs its own SIGTERM handler while a flow runs (it raises
``TerminationSignal`` and the run ends Crashed); :func:`stop_signals_in_flow` puts this one
back for the duration of the train flow's body, and :func:`reclaim_stop_signals` takes it back
after each child flow run (whose engine may leave Prefect's handler installed).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from infra.driver.session import STOP_REQUESTED

logger = logging.getLogger("rlpipe.signals")

#: The signals that stop a run after its iteration.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []
_flow_blocks = 0  #: :func:`stop_signals_in_flow` blocks open in the main thread


def stop_signal() -> int | None:
    """The first stop signal this process received (None: none)."""
    return _received[0] if _received else None


def exit_code_of(signum: int) -> int:
    """The shell's exit status of a process stopped by ``signum`` (128 + its number)."""
    return 128 + int(signum)


def request_stop(signum: int, frame: Any) -> None:
    """Signal handler: the first signal asks for a stop, a second one aborts."""
    if STOP_REQUESTED.is_set() and _received:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _received.append(signum)
    STOP_REQUESTED.set()
    logger.warning(
        "%s: stopping after this iteration (with a checkpoint); send it again to abort",
        signal.Signals(signum).name,
    )


def note_termination(exc: BaseException) -> None:
    """Treat a ``TerminationSignal`` from Prefect's own handler as a stop request.

    Prefect's bridge (installed by a flow engine around a child flow's body) normally passes
    the signal on to this module's handler. When the Prefect runner announced the signal
    first, as it does for a cancellation from the Prefect UI or API, the bridge only raises:
    the run then stops here as if the handler had received it.
    """
    reclaim_stop_signals()  # (the commit that follows must not be cut by Prefect's bridge)
    if STOP_REQUESTED.is_set():
        return
    signum = int(getattr(exc, "signal", signal.SIGTERM))
    _received.append(signum)
    STOP_REQUESTED.set()
    logger.warning(
        "%s through Prefect (a cancellation): stopping after this iteration (with a checkpoint)",
        signal.Signals(signum).name,
    )


def install_stop_handlers() -> None:
    """Make SIGINT and SIGTERM request a stop (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)


@contextmanager
def stop_signals_in_flow() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM request a stop; the previous handlers after it.

    Used by the train and SFT flows, whose engine replaced the SIGTERM handler when the
    flow started. Outside the main thread (a flow run in a worker thread) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _flow_blocks
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    install_stop_handlers()
    _flow_blocks += 1
    try:
        yield
    finally:
        _flow_blocks -= 1
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


def reclaim_stop_signals() -> None:
    """Within a :func:`stop_signals_in_flow` block, make the stop handlers current again.

    Call it right after a child flow run returns. Its engine installs Prefect's SIGTERM bridge
    around the child; once the engine has acknowledged a cancellation announced by the Prefect
    runner, it leaves that bridge installed when the child ends, so the runner's SIGTERM would
    raise ``TerminationSignal`` anywhere in the run loop (and the run would end failed instead
    of stopping after its iteration). Outside such a block, or outside the main thread, this
    does nothing.
    """
    if _flow_blocks == 0 or threading.current_thread() is not threading.main_thread():
        return
    if any(signal.getsignal(signum) is not request_stop for signum in STOP_SIGNALS):
        logger.debug("taking SIGINT/SIGTERM back from the child flow's engine")
        install_stop_handlers()


def reset_stop_request() -> None:
    """Forget a received stop signal (tests; a process that runs several flows)."""
    _received.clear()
    STOP_REQUESTED.clear()
