"""A deployment run on a real process worker fails midway, is retried the way the Prefect UI
does it, resumes from its last checkpoint and completes in the same MLflow run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import AwaitingRetry

from tests.integration.conftest import ROOT, kill_process_group

pytestmark = pytest.mark.integration
PREFECT = str(Path(sys.executable).with_name("prefect"))
ITERATIONS = 4


def prefect_env(api: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RAY_ADDRESS"))}
    env.update(
        PREFECT_API_URL=api,
        PREFECT_HOME=str(home),
        RLPIPE_ROOT=str(ROOT),
        PREFECT_WORKER_QUERY_SECONDS="1",
        OMP_NUM_THREADS="1",
    )
    return env


def prefect_cli(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        [PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"prefect {args} failed:\n{(proc.stdout + proc.stderr)[-4000:]}"


def wait_state(api, flow_run_id, done, timeout: float = 420):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.read_flow_run(flow_run_id)
        if run.state and done(run.state):
            return run
        time.sleep(1)
    raise AssertionError(f"flow run stuck in {run.state.type if run.state else None}")


def test_deployment_fails_then_ui_retry_resumes_from_checkpoint(prefect_api, tmp_path):
    env = prefect_env(prefect_api, tmp_path / "home")
    prefect_cli(["work-pool", "create", "rlpipe-process", "--type", "process", "--overwrite"], env)
    prefect_cli(["--no-prompt", "deploy", "--name", "train-ppo-cartpole"], env)
    worker = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "rlpipe-process", "--type", "process"],
        cwd=ROOT,
        env=env,
        stdout=(tmp_path / "worker.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out = tmp_path / "out"
    overrides = [
        f"run.output_dir={out}",
        f"run.max_iterations={ITERATIONS}",
        "run.checkpoint_interval=2",
        "run.eval_interval=0",
        "run.fail_at_iteration=2",  # after the checkpoint of step 2
        "rollout.num_steps=32",
    ]
    try:
        with (
            temporary_settings({PREFECT_API_URL: prefect_api}),
            get_client(sync_client=True) as api,
        ):
            deployment = api.read_deployment_by_name("train/train-ppo-cartpole")
            flow_run = api.create_flow_run_from_deployment(
                deployment.id, parameters={"overrides": overrides, "run_name": "deploy-retry"}
            )
            failed = wait_state(api, flow_run.id, lambda s: s.is_final())
            assert failed.state.is_failed(), failed.state
            manifest = (out / "deploy-retry" / "checkpoints" / "latest.json").read_text()
            assert '"step": 2' in manifest
            # what the UI's Retry button does
            api.set_flow_run_state(
                flow_run.id, AwaitingRetry(scheduled_time=datetime.now(timezone.utc)), force=True
            )
            done = wait_state(api, flow_run.id, lambda s: s.is_final())
            assert done.state.is_completed(), done.state
            assert done.run_count == 2
            children = api.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run.id])
                )
            )
            names = sorted(c.name for c in children)
            # iterations 0 and 1 ran once (before the failure); the retry started at 2
            assert names == [f"iteration-{i}" for i in range(ITERATIONS)], names
    finally:
        kill_process_group(worker)
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    (run,) = client.search_runs(
        [client.get_experiment_by_name("ppo_cartpole").experiment_id],
        "tags.`rlpipe.run_name` = 'deploy-retry'",
    )
    assert run.info.status == "FINISHED"
    assert run.data.tags["prefect.flow_run_id"] == str(flow_run.id)
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "time/iteration"))
    assert steps == list(range(ITERATIONS))  # each iteration logged once, in one MLflow run
