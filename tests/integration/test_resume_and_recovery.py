"""Resume after SIGKILL ends bit-identical; killed workers are rebuilt and the run completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
from prefect.settings import PREFECT_API_URL, temporary_settings
from safetensors.torch import load_file

from tests.integration.conftest import (
    CARTPOLE_EXPERIMENT,
    ROOT,
    kill_process_group,
    run_train,
    train_cmd,
    wait_for_checkpoint,
)

pytestmark = pytest.mark.integration
COMMON = (
    "run.max_iterations=5",
    "run.checkpoint_interval=2",
    "run.eval_interval=0",
    "env.num_envs=4",
    "rollout.num_steps=64",
)


def _final_state(run_dir: Path, step: int) -> tuple[dict, dict]:
    folder = run_dir / "checkpoints" / f"step_{step:06d}" / "actor_0"
    weights = load_file(folder / "model.safetensors")
    optim = torch.load(folder / "optimizer.pt", weights_only=True)
    return weights, optim


def test_sigkill_then_resume_is_bit_identical(tmp_path: Path, train_env) -> None:
    run_train(tmp_path, train_env, "run.name=reference", *COMMON)

    proc = subprocess.Popen(
        train_cmd(tmp_path, "run.name=resumed", *COMMON),
        cwd=ROOT,
        env=train_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        first = wait_for_checkpoint(tmp_path / "resumed", 2, proc)
    finally:
        kill_process_group(proc)
    assert first["step"] in (2, 4)
    assert not (tmp_path / "resumed" / "checkpoints" / "step_000005").exists()

    out = run_train(tmp_path, train_env, "run.name=resumed", *COMMON)
    assert f"resumed_from: {first['step']}" in out
    manifest = json.loads((tmp_path / "resumed" / "checkpoints" / "latest.json").read_text())
    assert manifest["step"] == 5
    assert manifest["mlflow_run_id"] == first["mlflow_run_id"]  # same MLflow run continued

    ref_w, ref_opt = _final_state(tmp_path / "reference", 5)
    res_w, res_opt = _final_state(tmp_path / "resumed", 5)
    assert ref_w.keys() == res_w.keys()
    for name in ref_w:
        assert torch.equal(ref_w[name], res_w[name]), f"weight {name} differs after resume"
    for pid, state in ref_opt["state"].items():
        for key, value in state.items():
            assert torch.equal(value, res_opt["state"][pid][key]), f"optimizer {pid}.{key} differs"


def test_killed_workers_are_rebuilt_and_run_completes(
    tmp_path: Path, train_env, prefect_api: str
) -> None:
    proc = subprocess.Popen(
        train_cmd(
            tmp_path,
            "run.name=recover",
            "run.max_iterations=8",
            "run.checkpoint_interval=2",
            "run.eval_interval=0",
        ),
        cwd=ROOT,
        env=train_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for_checkpoint(tmp_path / "recover", 2, proc)
        pids = json.loads((tmp_path / "recover" / "workers.json").read_text())
        os.kill(pids["env"][0], signal.SIGKILL)  # env worker: rebuilt and reseeded
        wait_for_checkpoint(tmp_path / "recover", 4, proc)
        pids = json.loads((tmp_path / "recover" / "workers.json").read_text())
        assert pids["env"][0] != 0
        os.kill(pids["actor"][0], signal.SIGKILL)  # trainer: rebuilt from the last checkpoint
        output, _ = proc.communicate(timeout=400)
    finally:
        kill_process_group(proc)
    assert proc.returncode == 0, output[-5000:]
    assert "rebuilt dead workers {'env': [0]}" in output
    assert "rebuilt dead workers {'actor': [0]}" in output
    manifest = json.loads((tmp_path / "recover" / "checkpoints" / "latest.json").read_text())
    assert manifest["step"] == 8
    # The recoveries are visible in Prefect as retries: the iteration flow runs whose
    # worker died ran twice, and their state history passed through AwaitingRetry.
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id])
    parent = run.data.tags["prefect.flow_run_id"]
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        children = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent])
            )
        )
        retried = [c for c in children if c.run_count > 1]
        assert len(retried) >= 2, [(c.name, c.run_count) for c in children]
        for child in retried:
            states = {s.name for s in api.read_flow_run_states(child.id)}
            assert "AwaitingRetry" in states and child.state.is_completed(), (child.name, states)
