"""The local stack: Prefect server, work pool and worker, MLflow server (and a Ray head).

Everything binds 127.0.0.1 and keeps its state under one folder::

    <home>/stack.json          URLs and process ids of the running stack
    <home>/prefect/            PREFECT_HOME of the server and the worker (SQLite database)
    <home>/mlflow/mlflow.db    MLflow tracking store (SQLite)
    <home>/mlflow/artifacts/   MLflow artifacts (unless --artifacts names s3://...)
    <home>/logs/*.log          one log per process

The worker runs deployments with ``MLFLOW_TRACKING_URI`` pointing at the stack's MLflow
server, so every run a deployment starts logs there. ``scripts/stack.py`` is its CLI.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infra.cluster.runtime_env import BASE_ENV
from infra.ops.prefect_api import LocalPrefectServer
from infra.ops.ray_head import LocalRayHead
from infra.ops.stack_state import PROJECT_ROOT, STATE_FILE, read_state
from infra.processes import executable, pid_alive, port_free, signal_group

logger = logging.getLogger(__name__)
POOL = "rlpipe-process"


class StackError(RuntimeError):
    """The stack cannot start (port taken, already running) or a component failed."""


@dataclass
class StackSettings:
    """What to start and where.

    Attributes:
        home: Folder for all state and logs.
        prefect_port: Port of the Prefect server (UI and API).
        mlflow_port: Port of the MLflow server (UI and tracking API).
        artifacts: MLflow artifact destination: a local folder or ``s3://bucket/prefix``
            (None: ``<home>/mlflow/artifacts``). The server proxies artifact traffic, so
            only the stack needs S3 credentials.
        pool: Name of the process work pool the worker serves.
        ray: Also start a Ray head and point the worker's runs at it (``RAY_ADDRESS``).
        ray_cpus: CPUs of that head.
    """

    home: Path
    prefect_port: int = 4200
    mlflow_port: int = 5000
    artifacts: str | None = None
    pool: str = POOL
    ray: bool = False
    ray_cpus: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def prefect_api(self) -> str:
        """The Prefect API URL."""
        return f"http://127.0.0.1:{self.prefect_port}/api"

    @property
    def mlflow_url(self) -> str:
        """The MLflow server URL (UI and ``MLFLOW_TRACKING_URI``)."""
        return f"http://127.0.0.1:{self.mlflow_port}"


class LocalStack:
    """Starts and stops the stack's processes (children of this process, stopped by PID).

    Args:
        settings: What to start and where.
    """

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.home = settings.home.resolve()
        self.logs = self.home / "logs"
        self.prefect: LocalPrefectServer | None = None
        self.mlflow: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.ray: LocalRayHead | None = None

    # -- start --------------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> dict:
        """Start every component, wait until each answers, write ``stack.json``.

        Returns:
            The state written to ``stack.json`` (URLs, pids, environment for clients).

        Raises:
            StackError: A stack already runs from ``home``, a port is taken, or a
                component did not come up (the others are stopped again).
        """
        s = self.settings
        running = read_state(self.home)
        if running and pid_alive(running["pid"]):
            raise StackError(
                f"a stack is already running from {self.home} (pid {running['pid']}); "
                f"stop it with: python scripts/stack.py down --home {self.home}"
            )
        for name, port in (("--prefect-port", s.prefect_port), ("--mlflow-port", s.mlflow_port)):
            if not port_free(port):
                raise StackError(f"port {port} on 127.0.0.1 is in use; choose another with {name}")
        for folder in (self.logs, self.home / "prefect", self.home / "mlflow"):
            folder.mkdir(parents=True, exist_ok=True)
        try:
            started = time.perf_counter()
            self.prefect = LocalPrefectServer(
                self.logs / "prefect-server.log",
                port=s.prefect_port,
                extra_env={"PREFECT_HOME": str(self.home / "prefect")},
            )
            self.mlflow = self._start_mlflow()
            if s.ray:
                self.ray = LocalRayHead(num_cpus=s.ray_cpus, log_path=self.logs / "ray-head.log")
            self.prefect.wait_healthy(timeout=timeout)
            _wait_http(
                f"{s.mlflow_url}/health", self.mlflow, self.logs / "mlflow-server.log", timeout
            )
            if self.ray:
                self.ray.wait_ready(timeout=timeout)
            self._create_pool()
            self.worker = self._start_worker()
            state = self._state()
            _write_state(self.home, state)
            logger.info("local stack up in %.1fs", time.perf_counter() - started)
            return state
        except BaseException:
            self.stop()
            raise

    def _start_mlflow(self) -> subprocess.Popen:
        s = self.settings
        artifacts = s.artifacts or str(self.home / "mlflow" / "artifacts")
        cmd = [
            executable("mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(s.mlflow_port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.home / 'mlflow' / 'mlflow.db'}",
            "--artifacts-destination",
            artifacts,
        ]
        env = self._env()
        # The server's job runner (GenAI trace rollups, scorers) adds eight processes that
        # rlpipe never uses and that slow start and stop on a small machine.
        env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
        return _spawn(cmd, self.logs / "mlflow-server.log", env)

    def _create_pool(self) -> None:
        cmd = [
            executable("prefect"),
            "work-pool",
            "create",
            self.settings.pool,
            "--type",
            "process",
        ]
        cmd.append("--overwrite")
        proc = subprocess.run(
            cmd, env=self._client_env(), capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise StackError(f"creating work pool failed:\n{(proc.stdout + proc.stderr)[-2000:]}")

    def _start_worker(self) -> subprocess.Popen:
        cmd = [executable("prefect"), "worker", "start", "--pool", self.settings.pool]
        cmd += ["--type", "process"]
        return _spawn(cmd, self.logs / "worker.log", self._client_env(), cwd=PROJECT_ROOT)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **BASE_ENV}
        for key in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
            env.pop(key, None)
        return env

    def _client_env(self) -> dict[str, str]:
        """Environment of the worker (and so of every flow run it starts)."""
        env = self._env()
        env.update(client_env(self.settings, self.ray.address if self.ray else None))
        env["PREFECT_HOME"] = str(self.home / "prefect")
        env["PREFECT_WORKER_QUERY_SECONDS"] = os.environ.get("PREFECT_WORKER_QUERY_SECONDS", "5")
        return env

    def _state(self) -> dict:
        s = self.settings
        processes = {
            "prefect-server": self.prefect.process.pid if self.prefect else None,
            "mlflow-server": self.mlflow.pid if self.mlflow else None,
            "worker": self.worker.pid if self.worker else None,
            "ray-head": self.ray.process.pid if self.ray else None,
        }
        return {
            "pid": os.getpid(),
            "home": str(self.home),
            "prefect_ui": f"http://127.0.0.1:{s.prefect_port}",
            "mlflow_ui": s.mlflow_url,
            "pool": s.pool,
            "ray_address": self.ray.address if self.ray else None,
            "processes": {k: v for k, v in processes.items() if v},
            "env": client_env(s, self.ray.address if self.ray else None),
        }

    # -- stop ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the worker, the Ray head and the servers (in that order), by process id."""
        if self.worker is not None:
            _stop_group(self.worker, "worker")
        if self.ray is not None:
            self.ray.stop()
        if self.mlflow is not None:
            _stop_group(self.mlflow, "mlflow server")
        if self.prefect is not None:
            self.prefect.stop()
        state = read_state(self.home)
        if state and state.get("pid") == os.getpid():
            (self.home / STATE_FILE).unlink(missing_ok=True)


def client_env(settings: StackSettings, ray_address: str | None = None) -> dict[str, str]:
    """Variables a shell (or the worker) needs to use the stack."""
    env = {
        "PREFECT_API_URL": settings.prefect_api,
        "MLFLOW_TRACKING_URI": settings.mlflow_url,
        "RLPIPE_ROOT": str(PROJECT_ROOT),
    }
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return env


def stop_running(home: Path, timeout: float = 180.0) -> bool:
    """Ask the stack started from ``home`` to stop (SIGTERM to its process) and wait.

    Returns:
        True if a running stack was stopped, False if none was running.
    """
    state = read_state(home)
    if not state or not pid_alive(state["pid"]):
        (home / STATE_FILE).unlink(missing_ok=True)
        return False
    os.kill(state["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(state["pid"]):
        time.sleep(0.2)
    if pid_alive(state["pid"]):
        raise StackError(f"stack process {state['pid']} did not stop in {timeout:.0f}s")
    return True


def _write_state(home: Path, state: dict) -> None:
    tmp = home / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(home / STATE_FILE)


def _spawn(
    cmd: list[str], log: Path, env: dict[str, str], cwd: Path | None = None
) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )


def _stop_group(proc: subprocess.Popen, name: str, timeout: float = 30.0) -> None:
    """SIGTERM the process group led by ``proc`` (its own session), then SIGKILL."""
    if proc.poll() is None:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            logger.warning("%s (pid %d) did not stop in %.0fs; killing it", name, proc.pid, timeout)
    signal_group(proc.pid, signal.SIGKILL)  # children that outlived their parent
    proc.wait()


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise StackError(f"{url} server exited with {proc.returncode}; {log}:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise StackError(f"{url} did not answer within {timeout:.0f}s; see {log}")
