"""Ctrl-C in a terminal: the whole foreground process group gets SIGINT. The run finishes
its iteration, commits a checkpoint, reports its final state (Cancelled) to the Prefect API
it started (which must survive the Ctrl-C) and exits 130; a rerun against another MLflow
store resumes from that checkpoint in a new MLflow run linked to the first one. SIGTERM
(``kill``, Kubernetes) stops it the same way and exits 143.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from infra.ops.processes import port_listening, session_pids
from tests.integration.conftest import (
    kill_process_group,
    run_process,
    run_train,
    start_process,
    train_cmd,
)

pytestmark = pytest.mark.integration
TOKEN = "hf_secret0123456789"
OVERRIDES = (
    "run.name=stopped",
    "run.max_iterations=6",
    "run.eval_interval=0",
    "run.checkpoint_interval=100",  # only the stop's checkpoint and the final one
    "env.num_envs=4",
    "rollout.num_steps=32",
    f"model.hf_token={TOKEN}",  # a secret that must not reach Prefect
)


def _wait_for_text(log: Path, pattern: str, proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if re.search(pattern, text):
            return text
        if proc.poll() is not None:
            raise AssertionError(f"training exited early ({proc.returncode}):\n{text[-4000:]}")
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not seen within {timeout}s")


def _signal_after_first_iteration(
    tmp_path: Path, env: dict[str, str], overrides: tuple[str, ...], log: Path, send: Any
) -> tuple[int, float, str, int]:
    """Start a run in its own process group (like a terminal's job), call ``send(pid)``
    after its first iteration; the exit code, the seconds from the signal to the exit, the
    log text up to its first iteration and the run's process id."""
    proc = start_process(train_cmd(tmp_path, *overrides), env, log)
    try:
        text = _wait_for_text(log, r"iter 1/6", proc, timeout=480)
        started = time.monotonic()
        send(proc.pid)
        code = proc.wait(timeout=300)
        return code, time.monotonic() - started, text, proc.pid
    finally:
        if proc.poll() is None:
            kill_process_group(proc)


def _flow_run_states(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT name, state_type FROM flow_run").fetchall())


def test_ctrl_c_commits_the_iteration_and_a_rerun_on_another_store_resumes(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in train_env.items() if k != "PREFECT_API_URL"}  # as in a terminal
    env["PREFECT_HOME"] = str(home)
    log = tmp_path / "first.log"
    ctrl_c = lambda pid: os.killpg(pid, signal.SIGINT)  # noqa: E731 - what Ctrl-C does
    code, _, text, pid = _signal_after_first_iteration(tmp_path, env, OVERRIDES, log, ctrl_c)
    port = int(re.search(r"local Prefect API at http://127.0.0.1:(\d+)/api", text)[1])
    first = log.read_text(errors="replace")
    assert code == 130, first[-5000:]

    manifest = json.loads((tmp_path / "stopped" / "checkpoints" / "latest.json").read_text())
    step = manifest["step"]
    assert 1 <= step < 6 and f"stopped on request (SIGINT) after iteration {step}," in first
    assert (tmp_path / "stopped" / "checkpoints" / f"step_{step:06d}" / "COMPLETE").exists()
    states = _flow_run_states(home / "prefect.db")  # the API lived to record them
    assert states.pop("train-stopped") == "CANCELLED", states
    assert sorted(states) == [f"iteration-{i}" for i in range(step)]
    assert set(states.values()) == {"COMPLETED"}
    deadline = time.monotonic() + 30
    while (port_listening(port) or session_pids(pid)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not port_listening(port), "the Prefect API outlived the run that started it"
    assert session_pids(pid) == [], "the run left processes behind"
    for path in home.glob("prefect.db*"):
        assert TOKEN.encode() not in path.read_bytes(), f"the secret reached {path.name}"
    assert TOKEN not in first

    second_store = f"sqlite:///{tmp_path / 'server' / 'mlflow.db'}"
    (tmp_path / "server").mkdir()
    rerun = run_train(tmp_path, {**train_env, "MLFLOW_TRACKING_URI": second_store}, *OVERRIDES)
    words = " ".join(rerun.split())  # the terminal wraps long log lines
    assert f"resumed_from: {step}" in words
    assert manifest["mlflow_run_id"] in words and "continuing in a new MLflow run" in words
    final = json.loads((tmp_path / "stopped" / "checkpoints" / "latest.json").read_text())
    assert final["step"] == 6 and final["mlflow_tracking_uri"] == second_store
    run = MlflowClient(second_store).get_run(final["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["rlpipe.previous_mlflow_run_id"] == manifest["mlflow_run_id"]
    assert run.data.tags["rlpipe.previous_tracking_uri"] == manifest["mlflow_tracking_uri"]
    assert run.data.params["model.hf_token"] == "***"


def test_sigterm_stops_the_run_like_ctrl_c_and_exits_143(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in train_env.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(home)
    log = tmp_path / "run.log"
    overrides = ("run.name=terminated", *OVERRIDES[1:])
    kill = lambda pid: os.kill(pid, signal.SIGTERM)  # noqa: E731 - what kill and Kubernetes send
    code, took, _, pid = _signal_after_first_iteration(tmp_path, env, overrides, log, kill)
    text = log.read_text(errors="replace")
    assert code == 143, text[-5000:]
    manifest = json.loads((tmp_path / "terminated" / "checkpoints" / "latest.json").read_text())
    step = manifest["step"]
    words = " ".join(text.split())
    assert 1 <= step < 6 and f"stopped on request (SIGTERM) after iteration {step}," in words
    assert took < 60, f"SIGTERM took {took:.0f} s to stop the run"
    states = _flow_run_states(home / "prefect.db")
    assert states.pop("train-terminated") == "CANCELLED", states
    assert set(states.values()) == {"COMPLETED"}  # every iteration it ran finished
    lease = tmp_path / "terminated" / "checkpoints" / "lease.json"
    assert not lease.exists(), "the run kept its lease"
    deadline = time.monotonic() + 30
    while session_pids(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert session_pids(pid) == [], "the run left processes behind"


def test_a_budget_stops_the_run_cleanly_and_a_larger_one_continues_it(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    small = (
        "run.name=budget",
        "run.max_iterations=3",
        "run.eval_interval=0",
        "env.num_envs=4",
        "rollout.num_steps=32",
    )
    # any iteration costs more than a millionth of a CPU-hour (3.6 ms of 1 reserved CPU)
    proc = run_process(train_cmd(tmp_path, *small, "run.budget_hours=1e-6"), train_env, 600)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 130, out[-4000:]
    assert "stopped by its budget (run.budget_hours) after iteration 1" in out
    manifest = json.loads((tmp_path / "budget" / "checkpoints" / "latest.json").read_text())
    assert manifest["step"] == 1
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = manifest["mlflow_run_id"]
    first = client.get_metric_history(run_id, "cost/cpu_hours_total")
    assert [m.step for m in first] == [0] and first[0].value > 1e-6
    phases = {k for k in client.get_run(run_id).data.metrics if k.startswith("cost/cpu_hours_")}
    assert {"cost/cpu_hours_rollout", "cost/cpu_hours_update"} <= phases
    assert "cost/cpu_hours_orchestration" in phases
    assert client.search_registered_models() == []  # a stopped run registers nothing

    rerun = " ".join(run_train(tmp_path, train_env, *small).split())  # no budget: finishes
    assert "resumed_from: 1" in rerun
    totals = sorted(client.get_metric_history(run_id, "cost/cpu_hours_total"), key=lambda m: m.step)
    assert [m.step for m in totals] == [0, 1, 2]
    assert totals[0].value < totals[1].value < totals[2].value  # the total carried over
