"""Starting the local stack (``scripts/stack.py``) in a test, and waiting on what it runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.ops.stack import read_state
from infra.processes import free_port, pid_alive, signal_group
from tests.integration.conftest import ROOT, kill_process_group

PREFECT = str(Path(sys.executable).with_name("prefect"))
STACK = [sys.executable, str(ROOT / "scripts" / "stack.py")]


def base_env(tmp_path: Path) -> dict[str, str]:
    skip = ("PYTEST_", "RAY_ADDRESS", "PREFECT_API_URL", "MLFLOW_TRACKING_URI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(
        PREFECT_HOME=str(tmp_path / "client-home"),
        PREFECT_WORKER_QUERY_SECONDS="1",
        # the stack's server schedules runs every 2 s instead of every minute
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2",
        OMP_NUM_THREADS="1",
    )
    return env


def stack_env(home: Path, env: dict[str, str]) -> dict[str, str]:
    """What ``eval "$(stack.py env)"`` exports, parsed."""
    out = subprocess.run(
        [*STACK, "env", "--home", str(home)], env=env, capture_output=True, text=True, check=True
    ).stdout
    pairs = [shlex.split(line.removeprefix("export "))[0] for line in out.splitlines()]
    return dict(pair.split("=", 1) for pair in pairs)


def prefect_cli(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        [PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"prefect {args} failed:\n{(proc.stdout + proc.stderr)[-4000:]}"


def wait_state(api, flow_run_id, done, timeout: float = 420, logs: tuple[Path, ...] = ()):
    """The flow run once ``done(state)``; else fail with its state history and the tails of
    ``logs`` (the worker's, the run's), so an intermittent failure says where it stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.read_flow_run(flow_run_id)
        if run.state and done(run.state):
            return run
        time.sleep(1)
    states = [
        f"{s.timestamp} {s.type.value} {s.name}" for s in api.read_flow_run_states(flow_run_id)
    ]
    raise AssertionError(
        f"flow run stuck in {run.state.type if run.state else None}; states:\n"
        + "\n".join(states)
        + "\n"
        + log_tails(logs)
    )


def log_tails(logs: tuple[Path, ...], chars: int = 3000) -> str:
    """The last ``chars`` characters of each log that exists, for a failure message."""
    return "\n".join(
        f"--- {log} ---\n{log.read_text(errors='replace')[-chars:]}"
        for log in logs
        if log.is_file()
    )


def wait_for_file(path: Path, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"stack exited ({proc.returncode}):\n{log.read_text()[-4000:]}"
        if path.is_file():
            return
        time.sleep(0.5)
    raise AssertionError(f"{path} not written in {timeout}s:\n{log.read_text()[-4000:]}")


def wait_for_text(
    log: Path, texts: tuple[str, ...], proc: subprocess.Popen, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(text in log.read_text() for text in texts):
            return
        assert proc.poll() is None, f"stack exited ({proc.returncode}):\n{log.read_text()[-4000:]}"
        time.sleep(0.2)
    raise AssertionError(f"{texts} not all printed in {timeout}s:\n{log.read_text()[-4000:]}")


@contextmanager
def running_stack(tmp_path: Path, env: dict[str, str], *args: str) -> Iterator[dict]:
    """``stack.py up`` on free ports; yields its stack.json; ``down`` must stop everything."""
    home = tmp_path / "stack"
    ports = ["--prefect-port", str(free_port()), "--mlflow-port", str(free_port())]
    log = tmp_path / "stack.out"
    stack = subprocess.Popen(
        [*STACK, "up", "--home", str(home), *ports, *args],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_file(home / "stack.json", stack, log)
        state = json.loads((home / "stack.json").read_text())
        # the CLI prints its summary right after it writes stack.json
        wait_for_text(log, ("Prefect UI", "MLflow UI", "state, logs"), stack)
        yield state
        down = subprocess.run(
            [*STACK, "down", "--home", str(home)], env=env, capture_output=True, text=True
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert stack.wait(timeout=60) == 0
    finally:
        if stack.poll() is None:
            kill_process_group(stack)
        leftover = read_state(home)  # still there only if down did not run or failed
        for pid in leftover["processes"].values() if leftover else []:
            signal_group(pid, signal.SIGKILL)  # each server leads its own session
    assert not (home / "stack.json").exists()
    left = [name for name, pid in state["processes"].items() if pid_alive(pid)]
    assert left == [], f"still running after down: {left}"
