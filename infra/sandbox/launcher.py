"""The sandbox's launcher: ``python -I -S launcher.py <json>``, standard library only.

It runs as three processes and talks to the parent on its own pipe (``status_fd``), one short
line per message, so that its messages never mix with the code's stdout and stderr:

- **L0** (started by the parent, in a new session): enters new pid and network namespaces
  when it can (as root: ``unshare(CLONE_NEWPID | CLONE_NEWNET)``; as another user:
  ``CLONE_NEWUSER`` as well, mapping the user to itself), hands the working directory to
  the sandbox user, reports ``mode <uid> <namespaces>`` and waits for L1.
- **L1** (the init of the new pid namespace, else a child subreaper; killed when L0 dies,
  which takes the whole namespace with it): starts L2, waits for it
  until the wall-clock deadline (then kills it and reports ``wall``), kills every process
  left (``kill(-1)`` inside its own pid namespace; else its children, as often as orphans are
  re-parented to it), and reports ``exit <wait status> <cpu of L2> <cpu of all>``.
- **L2**: as root, drops to the dedicated uid (``setgroups([])``, ``setgid``, ``setuid``),
  sets ``no_new_privs``, the parent-death signal and the rlimits, reports ``started`` and
  execs the code's interpreter. ``error <message>`` is reported by whichever step fails.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import sys
import time

CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
LAUNCHER_FAILED = 70  # exit status of L0 and L1 when they fail (sysexits' EX_SOFTWARE)
POLL_S = 0.01  # how often L1 looks at L2 where pidfd_open is missing

_libc = ctypes.CDLL(None, use_errno=True)


def report(fd: int, message: str) -> None:
    """Write one status line (short, so the write is atomic on the pipe)."""
    os.write(fd, (message.replace("\n", " ")[:1000] + "\n").encode("utf-8", "replace"))


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def _unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(root: bool) -> str:
    """Enter new pid and network namespaces; return ``"pid+net"``, or why not (no spaces)."""
    uid, gid = os.getuid(), os.getgid()
    try:
        if root:
            _unshare(CLONE_NEWPID | CLONE_NEWNET)
        else:
            _unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        return "none:" + (exc.strerror or str(exc)).replace(" ", "_")
    return "pid+net"


def _tasks_of(uid: int) -> int:
    """Threads of all processes whose real uid is ``uid`` (what RLIMIT_NPROC counts)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 0").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def run_code(cfg: dict, fd: int, uid: int, root: bool, nproc_base: int, parent: int) -> None:
    """L2: drop privileges, set the limits, report ``started`` and exec the interpreter."""
    try:
        if root:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
        if os.getppid() != parent:
            os._exit(LAUNCHER_FAILED)  # L1 died meanwhile
        limits = cfg["limits"]
        if nproc_base < 0:  # no namespace and not root: every process of the user counts
            nproc_base = _tasks_of(uid)
        cpu = max(1, int(limits["cpu_seconds"]))
        for which, value in (
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_CPU, (cpu, cpu + 1)),
            (resource.RLIMIT_AS, int(limits["memory_bytes"])),
            (resource.RLIMIT_FSIZE, int(limits["file_bytes"])),
            (resource.RLIMIT_NOFILE, int(limits["open_files"])),
            (resource.RLIMIT_NPROC, nproc_base + max(0, int(limits["processes"]))),
        ):
            soft, hard = value if isinstance(value, tuple) else (value, value)
            resource.setrlimit(which, (soft, hard))
        os.set_inheritable(fd, False)  # the code never sees the status pipe
        report(fd, "started")
        python = cfg["python"]
        os.execv(python, [python, *cfg["python_args"], cfg["script"]])
    except BaseException as exc:  # reported, never raised
        try:
            report(fd, f"error {type(exc).__name__}: {exc}")
        finally:
            os._exit(127)


def _wait_until(pid: int, deadline: float, watch: int) -> str:
    """How the wait for ``pid`` (a child) ended.

    Returns:
        ``"exited"``; ``"deadline"`` (``time.monotonic()`` passed it); ``"orphaned"``
        (``watch``, a pipe's read end, is at EOF: L0 died).
    """
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if pidfd is not None:
                ready = select.select([pidfd, watch], [], [], max(remaining, 0))[0]
                if pidfd in ready:
                    return "exited"
                return "orphaned" if ready else "deadline"
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return "exited"
            if select.select([watch], [], [], 0)[0]:
                return "orphaned"
            if remaining <= 0:
                return "deadline"
            time.sleep(min(POLL_S, remaining))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _children() -> list[int]:
    """Pids of this (single-threaded) process's children."""
    try:
        with open("/proc/thread-self/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        me, found = str(os.getpid()), []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/stat") as f:
                    if f.read().rpartition(")")[2].split()[1] == me:
                        found.append(int(name))
            except (OSError, IndexError):
                continue
        return found


def kill_all(own_pid_namespace: bool) -> None:
    """Kill and reap every process left below L1 (orphans are re-parented to it)."""
    while True:
        if own_pid_namespace:
            try:
                os.kill(-1, signal.SIGKILL)  # every process of the namespace but its init
            except ProcessLookupError:
                pass
        else:
            for pid in _children():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def init(
    cfg: dict, fd: int, uid: int, root: bool, nproc_base: int, namespaces: bool, l0_alive: int
) -> None:
    """L1: start L2, bound it by the deadline, kill what is left and report the exit.

    ``l0_alive`` is the read end of a pipe only L0 holds open: it reads EOF once L0 died.
    """
    try:
        own_pid_namespace = namespaces and os.getpid() == 1
        if own_pid_namespace:  # dies with L0, and the kernel kills the namespace with it
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        else:  # outlives L0 just long enough to kill what is left (orphans come to it)
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
        if select.select([l0_alive], [], [], 0)[0]:
            os._exit(LAUNCHER_FAILED)  # L0 died already
        me = os.getpid()
        code_pid = os.fork()
        if code_pid == 0:
            os.close(l0_alive)
            run_code(cfg, fd, uid, root, nproc_base, me)
        ended = _wait_until(code_pid, cfg["deadline"], l0_alive)
        if ended == "orphaned":  # the parent is gone (killed, Ctrl-C): take everything down
            os.kill(code_pid, signal.SIGKILL)
            os.waitpid(code_pid, 0)
            kill_all(own_pid_namespace)
            os._exit(LAUNCHER_FAILED)
        if ended == "deadline":
            report(fd, "wall")
            os.kill(code_pid, signal.SIGKILL)
        _, status, usage = os.wait4(code_pid, 0)
        kill_all(own_pid_namespace)
        everything = resource.getrusage(resource.RUSAGE_CHILDREN)
        report(
            fd,
            f"exit {status} {usage.ru_utime + usage.ru_stime:.3f} "
            f"{everything.ru_utime + everything.ru_stime:.3f}",
        )
        os._exit(0)
    except BaseException as exc:  # reported, never raised
        try:
            report(fd, f"error {type(exc).__name__}: {exc}")
        finally:
            os._exit(LAUNCHER_FAILED)


def main() -> None:
    """L0: namespaces, the sandbox user, L1; exits 0 when L1 did."""
    cfg = json.loads(sys.argv[1])
    fd = int(cfg["status_fd"])
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the parent's thread
        if os.getppid() != cfg["parent_pid"]:
            os._exit(LAUNCHER_FAILED)
        cfg["l0_pid"] = os.getpid()
        root = os.geteuid() == 0
        uid = int(cfg["uid_base"]) + os.getpid() if root else os.getuid()
        mode = enter_namespaces(root) if cfg["namespaces"] else "none:off"
        namespaces = mode == "pid+net"
        # What RLIMIT_NPROC counts besides the code's own processes: as root, the dedicated
        # uid has only L2; in a user namespace, L0, L1 and L2; else all of the user's.
        nproc_base = 1 if root else (3 if namespaces else -1)
        if root:
            os.chown(".", uid, uid)
            os.chown(cfg["script"], uid, uid)
        report(fd, f"mode {uid} {mode}")
        alive_read, alive_write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(alive_write)
            init(cfg, fd, uid, root, nproc_base, namespaces, alive_read)
        os.close(alive_read)
        _, status = os.waitpid(child, 0)
        os._exit(0 if status == 0 else LAUNCHER_FAILED)
    except BaseException as exc:  # reported, never raised
        try:
            report(fd, f"error {type(exc).__name__}: {exc}")
        finally:
            os._exit(LAUNCHER_FAILED)


if __name__ == "__main__":
    main()
