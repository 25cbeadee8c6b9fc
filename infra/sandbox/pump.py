"""The parent's side of a sandboxed run: its pipes, and the killing of what the code left.

:class:`Pump` feeds the code's stdin and reads its stdout, stderr and the launcher's status
pipe incrementally with a selector (so a program that prints forever costs a bounded
buffer), until the launcher exits (a pidfd, else polling ``waitid(WNOWAIT)``, which leaves it
unreaped so that its pid and process group id cannot be reused before they are killed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import time

logger = logging.getLogger(__name__)

CHUNK = 1 << 16
POLL_S = 0.02  # how often the launcher's exit is checked where pidfd_open is missing


class Pump:
    """Moves the bytes of one run; single-threaded (one per run).

    Args:
        proc: The launcher process (stdin, stdout and stderr are pipes).
        stdin: Bytes to feed to the code's stdin (then it is closed).
        status_fd: The read end of the launcher's status pipe.
        output_bytes: Bytes kept per output stream; the rest is read and dropped.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], stdin: bytes, status_fd: int, output_bytes: int
    ) -> None:
        self.proc = proc
        self.output_bytes = max(0, output_bytes)
        self.buffers: dict[int, bytearray] = {}
        self.selector = selectors.DefaultSelector()
        self.pidfd: int | None = None
        self._stdin = memoryview(stdin)
        assert proc.stdin and proc.stdout and proc.stderr
        for stream in (proc.stdout.fileno(), proc.stderr.fileno(), status_fd):
            os.set_blocking(stream, False)
            self.buffers[stream] = bytearray()
            self.selector.register(stream, selectors.EVENT_READ)
        self.stdout_fd, self.stderr_fd, self.status_fd = (
            proc.stdout.fileno(),
            proc.stderr.fileno(),
            status_fd,
        )
        if stdin:
            os.set_blocking(proc.stdin.fileno(), False)
            self.selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        try:
            self.pidfd = os.pidfd_open(proc.pid)
            self.selector.register(self.pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            self.pidfd = None

    def _exited(self) -> bool:
        return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.selector.unregister(fd)
            return
        buffer = self.buffers[fd]
        keep = self.output_bytes if fd != self.status_fd else 1 << 16
        if len(buffer) < keep:
            buffer += data[: keep - len(buffer)]

    def _write_stdin(self, fd: int) -> None:
        try:
            written = os.write(fd, self._stdin[:CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the code closed its stdin or ended: the rest is not wanted
            written = len(self._stdin)
        self._stdin = self._stdin[written:]
        if not self._stdin:
            self.selector.unregister(fd)
            assert self.proc.stdin
            self.proc.stdin.close()

    def _step(self, timeout: float) -> bool:
        """Move what is ready within ``timeout``; whether the launcher has exited."""
        exited = False
        for key, _ in self.selector.select(timeout):
            if key.fd == self.pidfd:
                exited = True
            elif key.events & selectors.EVENT_WRITE:
                self._write_stdin(key.fd)
            else:
                self._read(key.fd)
        return exited or (self.pidfd is None and self._exited())

    def until_exit(self, deadline: float) -> bool:
        """Move bytes until the launcher exits (True) or ``deadline`` passes (False)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            poll = remaining if self.pidfd is not None else min(POLL_S, remaining)
            if self._step(poll):
                return True

    def drain(self, timeout: float) -> None:
        """Read what is left in the pipes until end of file, for at most ``timeout``."""
        if self.pidfd is not None:
            self.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        deadline = time.monotonic() + timeout
        readers = {self.stdout_fd, self.stderr_fd, self.status_fd}
        while readers & set(self.selector.get_map() or ()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                logger.warning("sandbox: a process outside its reach still holds its pipes")
                return
            for key, _ in self.selector.select(remaining):
                if key.events & selectors.EVENT_WRITE:
                    self._write_stdin(key.fd)
                else:
                    self._read(key.fd)

    def close(self) -> None:
        """Close the selector, the pidfd and the parent's ends of the pipes."""
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(OSError):
            os.close(self.status_fd)


def _real_uid(pid: str) -> tuple[int, bool] | None:
    """The real uid of ``pid`` and whether it is a zombie; None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["Uid"].split()[0]), fields.get("State", "").strip().startswith("Z")
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _kill_if_uid(pid: int, uid: int) -> bool:
    """SIGKILL ``pid`` if it is a live process of ``uid``; whether it was one.

    The pidfd is opened before the uid is read again, so a pid reused meanwhile is never
    signalled.
    """
    found = _real_uid(str(pid))
    if found is None or found[0] != uid or found[1]:
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        found = _real_uid(str(pid))
        if found is None or found[0] != uid or found[1]:
            return False
        with contextlib.suppress(ProcessLookupError):
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def kill_uid(uid: int, timeout: float = 2.0) -> int:
    """SIGKILL every process whose real uid is ``uid`` until none is left alive.

    Only for the sandbox's dedicated uids (never 0, never this process's uid).

    Args:
        uid: The uid.
        timeout: Give up after this many seconds.

    Returns:
        How many kills were sent.
    """
    if uid in (0, os.getuid(), os.geteuid()):
        raise ValueError(f"refusing to kill every process of uid {uid}")
    sent, deadline = 0, time.monotonic() + timeout
    while True:
        alive = [
            int(pid)
            for pid in filter(str.isdigit, os.listdir("/proc"))
            if _kill_if_uid(int(pid), uid)
        ]
        sent += len(alive)
        if not alive:
            return sent
        if time.monotonic() > deadline:
            logger.warning("sandbox: processes of uid %d survive SIGKILL: %s", uid, alive)
            return sent
        time.sleep(0.005)
