"""Checkpoints and MLflow artifacts on S3 (moto_server on 127.0.0.1): a run fails midway,
is rerun and resumes from the checkpoint committed in the bucket."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import boto3
import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import ROOT, run_train, train_cmd

pytestmark = pytest.mark.integration
SMALL = (
    "run.name=s3run",
    "run.max_iterations=4",
    "run.checkpoint_interval=2",
    "run.eval_interval=0",
    "env.num_envs=4",
    "rollout.num_steps=32",
    "eval.num_episodes=2",  # the final evaluation
    "eval.num_envs=2",
)
#: Fail the run at iteration 3, after the checkpoint of step 2 (off when resuming).
FAIL_AT_3 = {"RLPIPE_FAULTS": "exit:weight_sync@3"}
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


def _keys(s3, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", []))


def _manifest(s3, bucket: str) -> dict:
    body = s3.get_object(Bucket=bucket, Key="ckpts/s3run/latest.json")["Body"].read()
    return json.loads(body)


def test_run_on_s3_fails_midway_and_resumes_from_the_bucket(
    tmp_path: Path, train_env: dict[str, str], moto_s3, s3_bucket: str
) -> None:
    env = {**train_env, **moto_s3.env()}
    overrides = (
        *SMALL,
        f"run.checkpoint_uri=s3://{s3_bucket}/ckpts",
        f"tracking.artifact_location=s3://{s3_bucket}/mlflow",
    )
    s3 = boto3.client("s3", endpoint_url=moto_s3.url)

    failed = subprocess.run(
        train_cmd(tmp_path, *overrides),
        cwd=ROOT,
        env={**env, **FAIL_AT_3},
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "injected fault exit:weight_sync@3" in output, output[-4000:]
    first = _manifest(s3, s3_bucket)
    assert (first["step"], first["dir"]) == (2, "step_000002")
    assert not (tmp_path / "s3run" / "checkpoints").exists()  # nothing written locally

    out = run_train(tmp_path, {**env, **FAIL_AT_3}, *overrides, timeout=300)
    assert "resumed_from: 2" in out
    assert f"s3://{s3_bucket}/ckpts/s3run" in out  # the summary's checkpoint dir
    final = _manifest(s3, s3_bucket)
    assert (final["step"], final["dir"]) == (4, "step_000004")
    assert final["mlflow_run_id"] == first["mlflow_run_id"]  # same MLflow run continued
    assert final["state"]["iteration"] == 4

    stored = _keys(s3, s3_bucket, "ckpts/s3run/")
    assert "latest.json" in stored
    for step in ("step_000002", "step_000004"):
        files = {k.removeprefix(f"{step}/") for k in stored if k.startswith(f"{step}/")}
        assert files == CHECKPOINT_FILES, step

    # MLflow: the experiment's artifact root is in the bucket; config and final checkpoint
    # were uploaded there (tracking itself stays on the local SQLite file).
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(final["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location == f"s3://{s3_bucket}/mlflow"
    prefix = f"mlflow/{run.info.run_id}/artifacts/"
    assert run.info.artifact_uri == f"s3://{s3_bucket}/{prefix.rstrip('/')}"
    artifacts = _keys(s3, s3_bucket, prefix)
    assert "config/resolved_config.yaml" in artifacts
    assert "checkpoints/step_000004/actor_0/model.safetensors" in artifacts
    listed = {a.path for a in client.list_artifacts(run.info.run_id)}  # MLflow reads S3 too
    assert {"config", "checkpoints"} <= listed
