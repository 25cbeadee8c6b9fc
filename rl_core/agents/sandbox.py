"""The sandbox protocol: run a snippet of Python under resource limits.

A sandbox is a **resource guard, not a security boundary**: it stops runaway code (loops,
fork bombs, huge allocations or files) and keeps it from the network and from rlpipe's
environment, but it does not isolate a determined attacker from the machine. Run untrusted
code in a container or a remote sandbox service (a :class:`Sandbox` of your own, registered
in :data:`SANDBOXES`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from rl_core.agents.outcomes import Outcome
from rl_core.kind_packages import load_kind_packages
from rl_core.registry import Registry


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run.

    Attributes:
        wall_seconds: Wall-clock time before the run is stopped.
        cpu_seconds: CPU time (``RLIMIT_CPU``).
        memory_bytes: Address space (``RLIMIT_AS``).
        file_bytes: Largest file the code may write (``RLIMIT_FSIZE``).
        processes: Processes the code may start besides itself (``RLIMIT_NPROC``, which
            counts threads too: with 0 the code can start neither).
        output_bytes: Captured stdout/stderr kept per stream (the rest is cut).
    """

    wall_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 0
    output_bytes: int = 64 << 10


@dataclass(frozen=True)
class SandboxRun:
    """What a sandboxed run did.

    Attributes:
        outcome: ``OK`` (exit 0), ``MODEL_FAILURE`` (the code failed or hit a limit it
            controls) or ``INFRA_FAILURE`` (the sandbox failed).
        exit_code: The process's exit status (negative: killed by that signal; None: it
            never started, or the sandbox failed).
        stdout: Captured standard output (cut at ``output_bytes``).
        stderr: Captured standard error (cut at ``output_bytes``).
        wall_s: Wall-clock seconds.
        cpu_s: CPU seconds the code used.
        limit: The limit that stopped it (``"wall"``, ``"cpu"``, ``"memory"``,
            ``"file_size"``, ``"processes"``), or None.
        network_isolated: The code ran cut off from the network (e.g. in a network
            namespace of its own); False where the sandbox could not block it.
        detail: Why it ended so, for logs (e.g. the launcher's error for an
            ``INFRA_FAILURE``); never the code's own output.
    """

    outcome: Outcome
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    limit: str | None = None
    network_isolated: bool = False
    detail: str = ""


class Sandbox(Protocol):
    """Runs Python code under limits; implementations must be safe to call from threads."""

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxRun:
        """Run ``code`` (a Python program) with ``stdin``; never raises for the code's errors."""
        ...


#: Sandbox name → class (or its ``"module:attribute"`` reference), constructed without
#: arguments by the code that runs tools and code rewards. The built-in ``subprocess``
#: sandbox is registered by the cluster code (``infra.sandbox``) when the kind packages load.
SANDBOXES: Registry[Any] = Registry("sandbox", load=load_kind_packages)


def build_sandbox(name: str) -> Any:
    """The sandbox registered as ``name``, built: a class is constructed without arguments.

    Raises:
        rl_core.registry.RegistryError: ``name`` is not a registered sandbox.
        Exception: Whatever importing or constructing it raised (the caller decides whether
            that is an infrastructure failure).
    """
    from rl_core.llm.implementations import resolve

    entry = resolve(SANDBOXES.get(name))
    return entry() if isinstance(entry, type) else entry


class LazySandbox:
    """A registered sandbox built on first use, once, safely from many threads.

    Args:
        name: Name in :data:`SANDBOXES` (checked here).

    Raises:
        rl_core.registry.RegistryError: ``name`` is not a registered sandbox.
    """

    def __init__(self, name: str) -> None:
        SANDBOXES.get(name)  # fail now, naming the registered sandboxes
        self.name = name
        self._sandbox: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        """The sandbox (built by :func:`build_sandbox` the first time)."""
        with self._lock:
            if self._sandbox is None:
                self._sandbox = build_sandbox(self.name)
            return self._sandbox
