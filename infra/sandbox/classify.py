"""How a sandboxed run ended: the launcher's report, and the rule that maps it to an outcome.

The rule (also in :mod:`infra.sandbox.subprocess_sandbox`'s docstring):

1. The launcher reported an error (the interpreter could not be executed, a limit could not
   be set), or it ended without reporting the code's exit: ``INFRA_FAILURE``.
2. Wall-clock expiry: ``MODEL_FAILURE`` (limit ``"wall"``) once the code has started (the
   launcher's ``started`` line, written right before it execs the interpreter), else
   ``INFRA_FAILURE`` (limit ``"wall"``).
3. Exit status 0: ``OK``.
4. Other exit status: ``MODEL_FAILURE``; the limit is read from the last line of stderr
   (``MemoryError`` or ``ENOMEM``: ``"memory"``; ``EFBIG``: ``"file_size"``; ``EAGAIN`` or
   "can't start new thread": ``"processes"``), else None.
5. Killed by a signal: ``SIGXCPU``, or ``SIGKILL`` once the CPU limit is used up:
   ``MODEL_FAILURE``, ``"cpu"``; ``SIGXFSZ``: ``MODEL_FAILURE``, ``"file_size"``; a crash of
   the code's own making (``SIGSEGV``, ``SIGBUS``, ``SIGFPE``, ``SIGILL``, ``SIGABRT``,
   ``SIGSYS``, ``SIGTRAP``: a stack overflow, a failed allocation in C code):
   ``MODEL_FAILURE``; any other signal (``SIGKILL`` below the CPU limit, ``SIGTERM``,
   ``SIGHUP``...) too: the code can send it to itself, and an outcome the code can choose
   must not take its response out of the group's statistics (a kernel OOM kill is charged
   to the code as well; ``RLIMIT_AS`` normally stops it first).
"""

from __future__ import annotations

import errno
import os
import re
import signal
from dataclasses import dataclass

from rl_core.agents.outcomes import Outcome

#: Signals a program raises by itself when it crashes.
CRASH_SIGNALS = frozenset(
    {
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGABRT,
        signal.SIGSYS,
        signal.SIGTRAP,
    }
)


@dataclass
class LauncherReport:
    """What the launcher wrote on its status pipe.

    Attributes:
        uid: The uid the code ran as.
        namespaces: ``"pid+net"`` when the code ran in new pid and network namespaces, else
            ``"none:<why>"``.
        started: The launcher was about to exec the code's interpreter.
        wall: The launcher stopped the code at the wall-clock deadline.
        status: The code's wait status (``os.wait`` encoding), or None if not reported.
        cpu_code: CPU seconds of the code's main process (with the children it reaped).
        cpu_all: CPU seconds of all the code's processes.
        error: The launcher's error message, if any.
    """

    uid: int | None = None
    namespaces: str = "none:unreported"
    started: bool = False
    wall: bool = False
    status: int | None = None
    cpu_code: float = 0.0
    cpu_all: float = 0.0
    error: str | None = None

    @property
    def network_isolated(self) -> bool:
        """Whether the code ran in a network namespace of its own."""
        return self.namespaces == "pid+net"


def parse_report(data: bytes) -> LauncherReport:
    """Parse the launcher's status lines (unknown or broken lines are ignored).

    Args:
        data: Everything read from the status pipe.

    Returns:
        The report.
    """
    report = LauncherReport()
    for line in data.decode("utf-8", "replace").splitlines():
        word, _, rest = line.partition(" ")
        fields = rest.split()
        try:
            if word == "mode" and len(fields) == 2:
                report.uid, report.namespaces = int(fields[0]), fields[1]
            elif word == "started":
                report.started = True
            elif word == "wall":
                report.wall = True
            elif word == "exit" and len(fields) == 3:
                report.status = int(fields[0])
                report.cpu_code, report.cpu_all = float(fields[1]), float(fields[2])
            elif word == "error":
                report.error = rest or "unknown launcher error"
        except ValueError:
            continue
    return report


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b")


def limit_from_stderr(stderr: str) -> str | None:
    """The limit a Python program's last error line names, if any.

    Args:
        stderr: The program's standard error.

    Returns:
        ``"memory"``, ``"file_size"``, ``"processes"`` or None.
    """
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return None
    # the last exception line: processes the code forked write their tracebacks to the
    # same stream, so the last line may be a fragment of another one's traceback
    errors = [line for line in lines if _EXCEPTION_LINE.match(line)]
    last = errors[-1] if errors else lines[-1]
    if last.startswith("MemoryError") or f"[Errno {errno.ENOMEM}]" in last:
        return "memory"
    if f"[Errno {errno.EFBIG}]" in last:
        return "file_size"
    if f"[Errno {errno.EAGAIN}]" in last or "can't start new thread" in last:
        return "processes"
    return None


@dataclass(frozen=True)
class Verdict:
    """The outcome of a run and why."""

    outcome: Outcome
    exit_code: int | None
    limit: str | None
    detail: str


def classify(
    report: LauncherReport, *, timed_out: bool, cpu_seconds: float, stderr: str
) -> Verdict:
    """Apply the outcome rule of this module's docstring.

    Args:
        report: The launcher's report.
        timed_out: The parent stopped the run at its own (later) wall-clock deadline.
        cpu_seconds: The run's CPU limit.
        stderr: The code's standard error (as kept).

    Returns:
        The outcome, the code's exit code (negative: the signal that killed it; None: it
        never started, or the launcher failed), the limit that stopped it and a line for logs.
    """
    code = None if report.status is None else os.waitstatus_to_exitcode(report.status)
    if report.error is not None:  # the code's exit, if any, does not count
        return Verdict(Outcome.INFRA_FAILURE, None, None, f"launcher: {report.error}")
    if timed_out or report.wall:
        if report.started:
            killed = -signal.SIGKILL if code is None else code
            return Verdict(Outcome.MODEL_FAILURE, killed, "wall", "wall-clock limit")
        return Verdict(
            Outcome.INFRA_FAILURE, None, "wall", "wall-clock limit before the code started"
        )
    if code is None:
        return Verdict(Outcome.INFRA_FAILURE, None, None, "the launcher did not report an exit")
    if code == 0:
        return Verdict(Outcome.OK, 0, None, "")
    if code > 0:
        limit = limit_from_stderr(stderr)
        detail = f"exit status {code}" + (f" ({limit} limit)" if limit else "")
        return Verdict(Outcome.MODEL_FAILURE, code, limit, detail)
    sig = -code
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and report.cpu_code >= cpu_seconds):
        return Verdict(Outcome.MODEL_FAILURE, code, "cpu", f"{name}: CPU limit")
    if sig == signal.SIGXFSZ:
        return Verdict(Outcome.MODEL_FAILURE, code, "file_size", f"{name}: file size limit")
    if sig in CRASH_SIGNALS:
        return Verdict(Outcome.MODEL_FAILURE, code, None, f"the code crashed ({name})")
    return Verdict(Outcome.MODEL_FAILURE, code, None, f"killed by {name}")
