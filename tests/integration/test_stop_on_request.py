"""Ctrl-C in a terminal: the whole foreground process group gets SIGINT. The run finishes
its iteration, commits a checkpoint, reports its final state (Cancelled) to the Prefect API
it started (which must survive the Ctrl-C) and exits 130; a rerun against another MLflow
store resumes from that checkpoint in a new MLflow run linked to the first one. SIGTERM
(``kill``, Kubernetes) stops it the same way and exits 143; a second CLI on a run being
trained is refused (one writer per run). A budget stops a run the same clean way.
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
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
from prefect.settings import PREFECT_API_URL, temporary_settings

from infra.checkpoint.lease_holder import holder_text
from infra.processes import port_listening, session_pids
from tests.integration.conftest import (
    CARTPOLE_EXPERIMENT,
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


def test_a_second_cli_is_refused_and_sigterm_stops_the_first_like_ctrl_c(
    tmp_path: Path, train_env: dict[str, str], prefect_api: str
) -> None:
    """One writer per run: a second CLI on a run being trained exits 2 naming the first.
    SIGTERM (``kill``, Kubernetes) then stops the first like Ctrl-C: it commits its
    iteration, releases the lease, marks its flow run Cancelled and exits 143."""
    run = "one-writer"
    # far more iterations than run while the second CLI starts and is refused: SIGTERM,
    # not the end of the run, must stop it (40 were once enough, before iterations got
    # faster)
    planned = 400
    overrides = (f"run.name={run}", f"run.max_iterations={planned}", *OVERRIDES[2:])
    log = tmp_path / "first.log"
    first = start_process(train_cmd(tmp_path, *overrides), train_env, log)
    try:
        lease_path = tmp_path / run / "checkpoints" / "lease.json"
        holder = _wait_for_lease(lease_path, first.pid, first)
        second = run_process(train_cmd(tmp_path, *overrides), train_env, timeout=300)
        assert first.poll() is None, "the first run ended before the second was refused"
        started = time.monotonic()
        os.kill(first.pid, signal.SIGTERM)  # what kill and Kubernetes send
        code = first.wait(timeout=300)
        took = time.monotonic() - started
    finally:
        if first.poll() is None:
            kill_process_group(first)

    # the second: exit 2 with the one-line holder message, naming the first's flow run
    out = second.stdout + second.stderr
    assert second.returncode == 2, out[-6000:]
    expected = f"error: run '{run}' is being trained by {holder_text(holder)}; "
    assert expected + "wait for it to finish or stop it" in out, out[-4000:]
    assert holder["prefect_flow_run_url"].startswith(prefect_api.removesuffix("/api"))

    # the first: stopped after a committed iteration, within a minute, lease released
    text = log.read_text(errors="replace")
    assert code == 143, text[-5000:]
    manifest = json.loads((tmp_path / run / "checkpoints" / "latest.json").read_text())
    step = manifest["step"]
    words = " ".join(text.split())
    assert 1 <= step < planned and f"stopped on request (SIGTERM) after iteration {step}," in words
    assert took < 60, f"SIGTERM took {took:.0f} s to stop the run"
    assert not lease_path.exists(), "the run kept its lease"
    deadline = time.monotonic() + 30
    while session_pids(first.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert session_pids(first.pid) == [], "the run left processes behind"
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(CARTPOLE_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], f"tags.`rlpipe.run_name` = '{run}'")
    assert [r.info.run_id for r in runs] == [manifest["mlflow_run_id"]]  # one MLflow run
    assert runs[0].info.status == "KILLED"  # stopped by a signal (a resume makes it RUNNING)
    assert runs[0].data.tags["prefect.flow_run_id"] == holder["prefect_flow_run_id"]

    # Prefect: the first flow run was cancelled, the second failed with the same message
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        flow_runs = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"train-{run}"]))
        )
    states = {str(r.id): r.state for r in flow_runs}
    assert len(states) == 2, states
    assert states.pop(holder["prefect_flow_run_id"]).is_cancelled()
    (refused,) = states.values()
    assert refused.is_failed()
    assert "is being trained by host" in (refused.message or ""), refused.message


def _wait_for_lease(path: Path, pid: int, proc: subprocess.Popen, timeout: float = 180) -> dict:
    """The lease record once process ``pid`` holds the lease at ``path``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"first training exited early with {proc.returncode}")
        try:
            record = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            record = {}
        if record.get("pid") == pid:
            return record
        time.sleep(0.1)
    raise AssertionError(f"process {pid} did not take the lease {path} within {timeout}s")


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
