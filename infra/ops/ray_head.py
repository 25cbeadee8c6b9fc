"""A Ray head started as its own process (``ray start --head --block``), on 127.0.0.1.

Used by the local stack (``scripts/stack.py --ray``) and by the tests that attach training
runs to a separately started cluster. Multi-node clusters are started by hand or by a
cluster launcher instead; see ``docs/ray-clusters.md``.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from infra.cluster.runtime_env import all_store_access_vars
from infra.processes import executable, port_free, port_listening, session_pids

logger = logging.getLogger(__name__)

#: Driver-side variables a head must not inherit: workers get them through runtime_env.
NOT_INHERITED = ("RAY_ADDRESS", "RLPIPE_EXT_MODULE", "OMP_NUM_THREADS", "MLFLOW_TRACKING_URI")
_PORT_FLAGS = (
    "--port",
    "--node-manager-port",
    "--object-manager-port",
    "--ray-client-server-port",
    "--dashboard-port",
    "--dashboard-agent-listen-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
)
_WORKER_PORTS = 200


class LocalRayHead:
    """``ray start --head`` on 127.0.0.1 with its own temp dir and ports; stop by PID.

    Args:
        num_cpus: CPUs the head offers.
        temp_dir: Ray's temp/session folder (default: a new short folder under the system
            temp dir; Ray's socket paths must stay under ~100 characters).
        log_path: Where the ``ray start`` output goes (default: ``<temp_dir>/ray-start.log``).
        env: Environment of the head (default: this process's), without
            :data:`NOT_INHERITED` and checkpoint store credentials.
    """

    def __init__(
        self,
        num_cpus: int = 2,
        temp_dir: str | Path | None = None,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        # A folder made here is removed by stop(), unless the head never came up (its log).
        self._own_temp_dir = temp_dir is None
        self._ready = False
        self.temp_dir = Path(temp_dir or tempfile.mkdtemp(prefix="rlpipe-ray-"))
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        ports = _free_ports(len(_PORT_FLAGS))
        worker_base = _free_port_range(_WORKER_PORTS, avoid=ports)
        self.port = ports[0]
        self.address = f"127.0.0.1:{self.port}"
        cmd = [executable("ray"), "start", "--head", "--block"]
        cmd += ["--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}"]
        cmd += [f"--num-cpus={num_cpus}", "--include-dashboard=false", "--disable-usage-stats"]
        cmd += [f"{flag}={port}" for flag, port in zip(_PORT_FLAGS, ports, strict=True)]
        # As for a local cluster (infra/cluster/ray_cluster.py): keep idle task workers warm.
        cmd += [f'--system-config={{"num_workers_soft_limit": {num_cpus + 8}}}']
        cmd += [f"--min-worker-port={worker_base}"]
        cmd += [f"--max-worker-port={worker_base + _WORKER_PORTS - 1}"]
        base_env = dict(os.environ) if env is None else dict(env)
        for key in (*NOT_INHERITED, *all_store_access_vars()):  # workers get them per group
            base_env.pop(key, None)
        # Single-machine mode: every Ray server of this head binds 127.0.0.1 only.
        base_env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
        base_env.setdefault("RAY_AUTH_MODE", "disabled")
        self.log_path = log_path or self.temp_dir / "ray-start.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=base_env,
            cwd=self.temp_dir,
            start_new_session=True,
        )
        logger.info("starting a Ray head at %s (pid %d)", self.address, self.process.pid)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until the head's GCS accepts connections and the node is up.

        Raises:
            RuntimeError: ``ray start`` exited or the head was not ready in time.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ray start exited with {self.process.returncode}; see {self.log_path}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            if b"Ray runtime started" in self.log_path.read_bytes() and port_listening(self.port):
                self._ready = True
                return
            time.sleep(0.3)
        raise RuntimeError(f"Ray head not ready after {timeout:.0f}s; see {self.log_path}")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the head and every process it started (its session), by process id."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # ray start --block stops its children
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                logger.warning("Ray head did not stop in %.0fs; killing its session", timeout)
        _kill_session(self.process.pid)
        self._log.close()
        if self._own_temp_dir and self._ready:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalRayHead:
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill_session(session_id: int) -> None:
    for pid in session_pids(session_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in ports:
            ports.append(port)
    return ports


def _free_port_range(size: int, avoid: list[int], attempts: int = 50) -> int:
    """First port of ``size`` consecutive ports that are free now (sampled, then checked)."""
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(20000, 60000 - size)
        span = range(base, base + size)
        if any(p in span for p in avoid):
            continue
        if all(port_free(p) for p in range(base, base + size, 7)) and port_free(span[-1]):
            return base
    raise RuntimeError(f"no range of {size} free ports found")
