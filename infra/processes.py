"""Helpers for the processes rlpipe starts (servers, Ray workers): ports, executables, kills.

Everything binds 127.0.0.1; processes are addressed by id, never by name.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1  # prctl(2) option: signal this process when its parent dies


def executable(name: str) -> str:
    """The console script ``name`` of this Python environment (else ``name`` on PATH)."""
    path = Path(sys.executable).with_name(name)
    return str(path) if path.exists() else name


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (an exited process not yet reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pgid`` (ignored if it is gone)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def session_pids(session_id: int) -> list[int]:
    """Processes of the session (``setsid``) led by ``session_id``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session_id:  # field 6 of /proc/<pid>/stat: session id
            pids.append(int(entry.name))
    return pids


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when we exit.

    For servers started in their own session (out of reach of a terminal's Ctrl-C) that
    must still never outlive the process that started them, even if it is killed. Linux
    only (elsewhere a no-op). The kernel sends the signal when the *thread* that started
    the child exits: start such servers from the main thread.
    """
    parent = os.getpid()

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None where unknown.

    Together with the pid it names one process: a pid reused later has another start time.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])  # field 22 of /proc/<pid>/stat: starttime
    except (OSError, IndexError, ValueError):
        return None


def kill_process(pid: int, start_time: int | None) -> bool:
    """SIGKILL process ``pid`` if it is still the one that started at ``start_time``.

    A pid whose start time differs (or cannot be read) is left alone: it may belong to
    another process by now.

    Returns:
        Whether the signal was sent.
    """
    if start_time is None or process_start_time(pid) != start_time:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to exit; returns whether it did."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
