"""The subprocess sandbox: model-written Python in a fresh interpreter under limits.

A **resource guard, not a security boundary** (see :mod:`rl_core.agents.sandbox`). Each run:

- writes the code to ``main.py`` in a fresh temporary directory (the code's working
  directory, ``HOME`` and ``TMPDIR``; removed afterwards) and runs ``<python> -I main.py``
  (isolated mode: no ``PYTHON*`` variables, no user site, no working directory on
  ``sys.path``; ``site`` still runs, so the interpreter's packages and ``exit()`` work) with
  an environment of ``PATH=/usr/bin:/bin``, ``LANG=C.UTF-8``, ``HOME`` and ``TMPDIR`` only;
- through a small launcher (:mod:`infra.sandbox.launcher`) that sets, in the code's process
  right before ``exec``: ``RLIMIT_CPU`` (soft ``cpu_seconds``, hard one more), ``RLIMIT_AS``
  (``memory_bytes``), ``RLIMIT_FSIZE`` (``file_bytes``), ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``
  64, ``RLIMIT_NPROC`` (``processes`` besides the code's own process; threads count too)
  and ``no_new_privs``; the launcher reports on a pipe of its own, never on stdout/stderr;
- feeds stdin and reads stdout and stderr incrementally, keeping ``output_bytes`` of each.

**Processes.** ``RLIMIT_NPROC`` counts every process of a uid and is not enforced for root.
So as root the code runs as a uid of its own, ``uid_base + <the launcher's pid>`` (pids are
unique while the launcher lives, so concurrent runs never share a uid or a process count),
with no supplementary groups; its directory is handed to that uid. As another user, the code
keeps the user's uid inside a new user namespace, where (Linux ≥ 5.14) the count is per
namespace. Nothing survives a run: the launcher's middle process is the init of a new pid
namespace (its exit makes the kernel kill the whole namespace; a ``setsid`` double fork
cannot leave it) or, without namespaces, a child subreaper that kills its children until none
is left (orphans, ``setsid`` ones included, are re-parented to it); the parent kills the
launcher's process group and, as root, every process of the run's uid when the launcher did
not finish; the launcher's processes get ``SIGKILL`` when their parent dies. Not caught:
without namespaces and not root, a process that escaped the group (``setsid``) when the
*parent* had to kill the launcher (wall-clock backstop, an exception such as
``KeyboardInterrupt``); and, everywhere, files the code writes outside its directory (e.g.
``/tmp``, ``/dev/shm``: there is no mount namespace).

**Network.** In a new network namespace (as root ``unshare(CLONE_NEWPID|CLONE_NEWNET)``; as
another user with ``CLONE_NEWUSER`` too) the code sees only a loopback that is down: no
connection anywhere, 127.0.0.1 included. Where namespaces are refused (a container without
``CAP_SYS_ADMIN``, user namespaces disabled) the sandbox does **not** block the network: it
says so in :attr:`SandboxRun.network_isolated` and in a warning logged once.

**Outcomes** (:mod:`infra.sandbox.classify`): exit 0 is ``OK``; an exception, another
non-zero exit, ``SIGXCPU``/``SIGKILL`` after the CPU limit (``"cpu"``), ``MemoryError``
(``"memory"``), ``EFBIG``/``SIGXFSZ`` (``"file_size"``), a refused fork or thread
(``"processes"``) or any signal that killed the code (it can signal itself) is
``MODEL_FAILURE``; a launcher that failed or could not start, or an interpreter that could
not be executed, is ``INFRA_FAILURE``. Wall-clock expiry (``"wall"``) is the model's once the
code has started (the launcher's ``started`` message, right before ``exec``) and the
infrastructure's before.

**Interpreter.** As root the code runs as an unprivileged uid, which must be able to read
the interpreter: by default ``sys.executable``, or when others cannot reach it (e.g. a
pyenv under ``/root``) the system's ``/usr/bin/python3`` (a warning says so); pass
``python=`` to choose.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from infra.sandbox.classify import classify, parse_report
from infra.sandbox.pump import Pump, kill_uid
from rl_core.agents.outcomes import Outcome
from rl_core.agents.sandbox import SandboxLimits, SandboxRun

logger = logging.getLogger(__name__)

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
#: First uid of the runs' dedicated uids as root (below 2**31 and systemd's container range).
UID_BASE = 0x7000_0000
OPEN_FILES = 64
#: Seconds past the wall-clock limit before the parent stops a launcher that did not.
WALL_GRACE_S = 0.5
DRAIN_S = 0.5
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str, *args: object) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args)


def others_can_run(path: str) -> bool:
    """Whether a user who is neither the owner nor in the group can execute ``path``."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


def default_python() -> str:
    """The interpreter for the code: ``sys.executable`` unless a dropped uid cannot run it."""
    if os.geteuid() != 0 or others_can_run(sys.executable):
        return sys.executable
    for candidate in SYSTEM_PYTHONS:
        if others_can_run(candidate):
            _warn_once(
                "python",
                "sandbox: the sandbox's uid cannot run %s (a directory above it is closed to "
                "others); sandboxed code runs with %s instead (pass python= to choose)",
                sys.executable,
                candidate,
            )
            return candidate
    return sys.executable


def _remove_tree(path: str) -> None:
    """Remove ``path``, restoring permissions the code may have taken away."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            with suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        logger.warning("sandbox: could not remove %s", path)


def _infra_run(started: float, detail: str) -> SandboxRun:
    """The result of a run the sandbox could not carry out."""
    return SandboxRun(
        Outcome.INFRA_FAILURE, None, "", "", time.monotonic() - started, 0.0, detail=detail
    )


class SubprocessSandbox:
    """Runs Python code in a subprocess under rlimits and namespaces; thread-safe.

    Args:
        python: The interpreter that runs the code (default: :func:`default_python`).
        python_args: Its options before the script (default ``-I``: isolated mode).
        namespaces: Use new pid and network namespaces where the kernel allows them.
        uid_base: As root, the code runs as ``uid_base + <launcher pid>``.
        temp_dir: Where the runs' directories are made (default: the system's); others
            must be able to traverse it when running as root.
        launcher_python: The interpreter that runs the launcher (default:
            ``sys.executable``; it runs as the calling user, before the uid is dropped).
    """

    def __init__(
        self,
        python: str | None = None,
        *,
        python_args: Sequence[str] = ("-I",),
        namespaces: bool = True,
        uid_base: int = UID_BASE,
        temp_dir: str | None = None,
        launcher_python: str | None = None,
    ) -> None:
        self.python = python or default_python()
        self.python_args = tuple(python_args)
        self.namespaces = namespaces
        self.uid_base = uid_base
        self.temp_dir = temp_dir
        self.launcher_python = launcher_python or sys.executable or self.python
        self._isolated: bool | None = None
        self._lock = threading.Lock()

    @property
    def network_isolated(self) -> bool:
        """Whether runs are cut off from the network (found by a first run, then cached)."""
        with self._lock:
            if self._isolated is None:
                probe = self.run("pass", limits=SandboxLimits(wall_seconds=30, cpu_seconds=5))
                self._isolated = probe.network_isolated
            return self._isolated

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxRun:
        """Run ``code`` with ``stdin`` under ``limits``; never raises for the code's errors.

        Args:
            code: A Python program.
            stdin: Its standard input.
            limits: Its limits (default: :class:`SandboxLimits`'s defaults).

        Returns:
            What the run did; see the module docstring for its outcome.
        """
        limits = limits or SandboxLimits()
        started = time.monotonic()
        workdir = None
        try:
            workdir = tempfile.mkdtemp(prefix="rlpipe-sandbox-", dir=self.temp_dir)
            result, mode = self._run_in(workdir, code, stdin, limits, started)
        except OSError as exc:  # the machine's fault (a full disk...): the run is cleaned up
            result, mode = _infra_run(started, f"the sandbox failed: {exc!r}"), None
        finally:
            if workdir is not None:
                _remove_tree(workdir)
        if result.outcome is Outcome.INFRA_FAILURE:
            logger.warning("sandbox: infrastructure failure: %s", result.detail)
        if mode is not None and not result.network_isolated:
            _warn_once(
                "network",
                "sandbox: no network namespace (%s): sandboxed code can reach the network",
                mode,
            )
        return result

    def _config(self, workdir: str, limits: SandboxLimits, started: float, fd: int) -> str:
        return json.dumps(
            {
                "python": self.python,
                "python_args": list(self.python_args),
                "script": "main.py",
                "namespaces": self.namespaces,
                "uid_base": self.uid_base,
                "parent_pid": os.getpid(),
                "status_fd": fd,
                "deadline": started + limits.wall_seconds,
                "limits": {
                    "cpu_seconds": limits.cpu_seconds,
                    "memory_bytes": limits.memory_bytes,
                    "file_bytes": limits.file_bytes,
                    "processes": limits.processes,
                    "open_files": OPEN_FILES,
                },
            }
        )

    def _run_in(
        self, workdir: str, code: str, stdin: str, limits: SandboxLimits, started: float
    ) -> tuple[SandboxRun, str | None]:
        """Run in ``workdir``; the result, and the launcher's namespace mode if it said."""
        # Lone surrogates go through as invalid UTF-8: a SyntaxError, the code's fault.
        Path(workdir, "main.py").write_bytes(code.encode("utf-8", "surrogatepass"))
        os.chmod(Path(workdir, "main.py"), 0o644)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [
                    self.launcher_python,
                    "-I",
                    "-S",
                    LAUNCHER,
                    self._config(workdir, limits, started, status_w),  # pass_fds keeps the number
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,
                pass_fds=(status_w,),
            )
        except OSError as exc:
            os.close(status_r)
            return _infra_run(started, f"could not start the launcher: {exc}"), None
        finally:
            os.close(status_w)
        return self._supervise(proc, status_r, stdin, limits, started)

    def _kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the launcher's process group and, as root, every process of the run's uid.

        The launcher is not reaped yet, so its pid (the group's id) cannot have been reused.
        """
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if os.geteuid() == 0:
            kill_uid(self.uid_base + proc.pid)

    def _supervise(
        self,
        proc: subprocess.Popen[bytes],
        status_fd: int,
        stdin: str,
        limits: SandboxLimits,
        started: float,
    ) -> tuple[SandboxRun, str | None]:
        """Pump the pipes until the launcher ends or the wall-clock backstop; clean up."""
        pump: Pump | None = None
        killed = False
        try:
            pump = Pump(
                proc, stdin.encode("utf-8", "surrogatepass"), status_fd, limits.output_bytes
            )
            exited = pump.until_exit(started + limits.wall_seconds + WALL_GRACE_S)
            report = parse_report(bytes(pump.buffers[status_fd]))
            if not exited or report.status is None or report.error is not None:
                # The launcher's init did not finish its own cleanup: do it from here.
                self._kill_all(proc)
                killed = True
            pump.drain(DRAIN_S)
        finally:
            if not killed:
                self._kill_all(proc)  # an exception (KeyboardInterrupt...) left us here
            _, wait_status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(wait_status)  # Popen must not wait
            if pump is not None:
                pump.close()
            else:
                os.close(status_fd)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
        report = parse_report(bytes(pump.buffers[status_fd]))
        stdout = bytes(pump.buffers[pump.stdout_fd]).decode("utf-8", "replace")
        stderr = bytes(pump.buffers[pump.stderr_fd]).decode("utf-8", "replace")
        verdict = classify(
            report, timed_out=not exited, cpu_seconds=limits.cpu_seconds, stderr=stderr
        )
        if report.status is not None:
            cpu = report.cpu_all
        else:
            cpu = usage.ru_utime + usage.ru_stime
        result = SandboxRun(
            verdict.outcome,
            verdict.exit_code,
            stdout,
            stderr,
            time.monotonic() - started,
            cpu,
            verdict.limit,
            network_isolated=report.network_isolated,
            detail=verdict.detail,
        )
        mode = report.namespaces if report.uid is not None else None
        return result, mode
