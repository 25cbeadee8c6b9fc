"""Resume after SIGKILL ends bit-identical, from checkpoints in S3 (moto_server on 127.0.0.1);
killed workers are rebuilt and the run completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import boto3
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
    run_process,
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


#: Files of a committed checkpoint of this preset, in its folder.
CHECKPOINT_FILES = {
    "COMPLETE",
    "actor_0/model.safetensors",
    "actor_0/optimizer.pt",
    "actor_0/trainer_state.pt",
    "config.json",
    "driver_rng.json",
    "spaces.json",
    "workers.pt",
}


def _bucket_keys(s3, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", []))


def _bucket_manifest(s3, bucket: str, key: str) -> dict | None:
    try:
        return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.NoSuchKey:
        return None


def _wait_for_bucket_checkpoint(
    s3, bucket: str, key: str, step: int, proc: subprocess.Popen, timeout: float = 300
) -> dict:
    """Wait until the manifest at ``key`` names a step of at least ``step``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"training exited early with {proc.returncode}")
        manifest = _bucket_manifest(s3, bucket, key)
        if manifest and manifest["step"] >= step:
            return manifest
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint at step {step} within {timeout}s")


def _final_state(folder: Path) -> tuple[dict, dict]:
    weights = load_file(folder / "actor_0" / "model.safetensors")
    optim = torch.load(folder / "actor_0" / "optimizer.pt", weights_only=True)
    return weights, optim


def test_sigkill_then_resume_from_the_bucket_is_bit_identical(
    tmp_path: Path, train_env, moto_s3, s3_bucket: str
) -> None:
    """A run whose checkpoints and MLflow artifacts live in S3 (moto) is SIGKILLed with its
    whole process group after a checkpoint, rerun, resumes from the checkpoint committed in
    the bucket, and ends bit-identical to an uninterrupted run of the same seed."""
    reference_dir, resumed_dir = tmp_path / "reference", tmp_path / "resumed"
    run_train(reference_dir, train_env, "run.name=reference", *COMMON)

    env = {**train_env, **moto_s3.env()}
    s3_args = (
        "run.name=s3run",
        *COMMON,
        f"run.checkpoint_uri=s3://{s3_bucket}/ckpts",
        f"tracking.artifact_location=s3://{s3_bucket}/mlflow",
    )
    s3 = boto3.client("s3", endpoint_url=moto_s3.url)
    manifest_key = "ckpts/s3run/latest.json"
    proc = subprocess.Popen(
        train_cmd(resumed_dir, *s3_args),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        first = _wait_for_bucket_checkpoint(s3, s3_bucket, manifest_key, 2, proc)
    finally:
        kill_process_group(proc)
    assert first["step"] in (2, 4) and first["dir"] == f"step_{first['step']:06d}"
    assert not (resumed_dir / "s3run" / "checkpoints").exists()  # nothing written locally

    out = run_train(resumed_dir, env, *s3_args)
    assert f"resumed_from: {first['step']}" in out
    assert f"s3://{s3_bucket}/ckpts/s3run" in out  # the summary's checkpoint dir
    final = _bucket_manifest(s3, s3_bucket, manifest_key)
    assert (final["step"], final["dir"]) == (5, "step_000005")
    assert final["mlflow_run_id"] == first["mlflow_run_id"]  # same MLflow run continued
    stored = _bucket_keys(s3, s3_bucket, "ckpts/s3run/")
    for step in ("step_000002", "step_000004", "step_000005"):
        files = {k.removeprefix(f"{step}/") for k in stored if k.startswith(f"{step}/")}
        assert files == CHECKPOINT_FILES, step

    # bit for bit: the final weights and optimizer state equal the uninterrupted run's
    downloaded = tmp_path / "downloaded"
    for name in ("model.safetensors", "optimizer.pt"):
        (downloaded / "actor_0").mkdir(parents=True, exist_ok=True)
        s3.download_file(
            s3_bucket, f"ckpts/s3run/step_000005/actor_0/{name}", str(downloaded / "actor_0" / name)
        )
    ref_w, ref_opt = _final_state(reference_dir / "reference" / "checkpoints" / "step_000005")
    res_w, res_opt = _final_state(downloaded)
    assert ref_w.keys() == res_w.keys()
    for name in ref_w:
        assert torch.equal(ref_w[name], res_w[name]), f"weight {name} differs after resume"
    for pid, state in ref_opt["state"].items():
        for key, value in state.items():
            assert torch.equal(value, res_opt["state"][pid][key]), f"optimizer {pid}.{key} differs"

    # MLflow: the experiment's artifact root is in the bucket; config and final checkpoint
    # were uploaded there (tracking itself stays on the local SQLite file).
    client = MlflowClient(f"sqlite:///{resumed_dir / 'mlflow.db'}")
    run = client.get_run(final["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location == f"s3://{s3_bucket}/mlflow"
    prefix = f"mlflow/{run.info.run_id}/artifacts/"
    assert run.info.artifact_uri == f"s3://{s3_bucket}/{prefix.rstrip('/')}"
    artifacts = _bucket_keys(s3, s3_bucket, prefix)
    assert "config/resolved_config.yaml" in artifacts
    assert "checkpoints/step_000005/actor_0/model.safetensors" in artifacts
    listed = {a.path for a in client.list_artifacts(run.info.run_id)}  # MLflow reads S3 too
    assert {"config", "checkpoints"} <= listed


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


def test_a_full_disk_stops_the_run_with_one_line_and_a_rerun_resumes(
    tmp_path: Path, train_env
) -> None:
    """The trainer's checkpoint files of iteration 4 hit a file-size limit (``RLIMIT_FSIZE``,
    as on a full disk): the run is not retried, it stops with one line naming the intact
    checkpoint of iteration 2, and the same command then resumes from it."""
    args = (
        "run.name=full",
        "run.max_iterations=4",
        "run.checkpoint_interval=2",
        "run.eval_interval=0",
        "env.num_envs=4",
        "rollout.num_steps=32",
    )
    env = {**train_env, "RLPIPE_FAULTS": "disk_full:checkpoint@3"}  # after iteration index 3
    proc = run_process(train_cmd(tmp_path, *args), env, timeout=600)
    out = proc.stdout + proc.stderr
    words = " ".join(out.split())  # the terminal wraps long lines
    assert proc.returncode == 1, out[-5000:]
    assert "checkpoint of iteration 4 not written to" in words, out[-5000:]
    assert "File too large" in words
    assert (
        "the checkpoint of iteration 2 is intact: free space and rerun the same command to "
        "resume from it" in words
    )
    assert "Traceback" not in out  # the traceback is in the run's log file only
    checkpoints = tmp_path / "full" / "checkpoints"
    assert json.loads((checkpoints / "latest.json").read_text())["step"] == 2
    assert not (checkpoints / "step_000004").exists()  # the partial folder was removed

    rerun = run_train(tmp_path, env, *args)
    assert "resumed_from: 2" in rerun
    assert json.loads((checkpoints / "latest.json").read_text())["step"] == 4
