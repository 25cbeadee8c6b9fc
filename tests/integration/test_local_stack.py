"""The local stack end to end: ``scripts/stack.py up`` starts a Prefect server, the work pool,
a process worker and an MLflow server; a deployment run fails midway, is retried by pressing
**Retry** in the Prefect UI (headless Chromium), resumes from its last checkpoint and
completes in the same MLflow run on the stack's MLflow server; another is stopped by pressing
**Cancel** (it commits its checkpoint and ends Cancelled); ``evaluate-latest`` on an
interval schedule is run by the worker and logs a child evaluation run; a sweep starts its
runs as deployment runs; two scheduled runs each train a new run (named by the scheduled
time), starting from the registry's best model; a ``python flows/train.py`` run started meanwhile uses the stack's
Prefect API and MLflow server; the MLflow server keeps artifacts in S3 (moto); ``down`` stops
every process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
)
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Scheduled
from selenium.webdriver.common.by import By

from tests.browser import chromium, click_text, screenshot, wait_for
from tests.integration.conftest import (
    CARTPOLE_EXPERIMENT,
    CARTPOLE_MODEL,
    ROOT,
)
from tests.integration.stack_helpers import (
    base_env,
    log_tails,
    prefect_cli,
    running_stack,
    stack_env,
    wait_state,
)
from tests.sweep_checks import check_sweep_report

pytestmark = pytest.mark.integration
ITERATIONS = 4


def test_stack_runs_a_deployment_that_fails_is_retried_and_logs_to_its_mlflow(
    tmp_path, s3_bucket, monkeypatch
):
    """The stack's MLflow server keeps artifacts in a bucket (``--artifacts s3://...``);
    its clients need no S3 credentials: the server proxies artifact traffic."""
    env = base_env(tmp_path)  # includes the moto endpoint and credentials, for the server
    with running_stack(tmp_path, env, "--artifacts", f"s3://{s3_bucket}/mlflow") as state:
        home = Path(state["home"])
        env.update(stack_env(home, env))
        assert env["MLFLOW_TRACKING_URI"] == state["mlflow_ui"]
        flow_run_id = deploy_fail_and_retry(env, tmp_path / "out", state["prefect_ui"])
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MLFLOW_S3_ENDPOINT_URL"):
            monkeypatch.delenv(key)  # this client has no way to reach S3 itself
        run_id = check_mlflow(env, s3_bucket, home, flow_run_id)
        cancel_in_the_ui(env, tmp_path / "out", state["prefect_ui"])
        scheduled_evaluation(env, tmp_path / "out", run_id)
        sweep_of_deployment_runs(env, tmp_path / "sweep-out")
        scheduled_training(env, tmp_path / "nightly-out")
        cli_run_uses_the_stack(base_env(tmp_path), home, state, tmp_path / "cli-out")


def cli_run_uses_the_stack(env: dict[str, str], home: Path, state: dict, out: Path) -> None:
    """``python flows/train.py`` with no service variables set uses the running stack."""
    env.update(RLPIPE_STACK="auto", RLPIPE_STACK_HOME=str(home))
    cmd = [sys.executable, str(ROOT / "flows" / "train.py"), "run.name=cli-attached"]
    cmd += [f"run.output_dir={out}", "run.max_iterations=1", "rollout.num_steps=32"]
    cmd += ["eval.video=false"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert f"using the running local stack ({home})" in output, output[-4000:]
    assert "started a local Prefect API" not in output
    api_url = state["env"]["PREFECT_API_URL"]
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as api:
        names = [r.name for r in api.read_flow_runs(limit=200)]
    assert "train-cli-attached" in names, names
    client = MlflowClient(state["mlflow_ui"])
    (run,) = client.search_runs(
        [client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id],
        "tags.`rlpipe.run_name` = 'cli-attached'",
    )
    assert run.info.status == "FINISHED"


def deploy_fail_and_retry(env: dict[str, str], out: Path, ui: str) -> str:
    """Deploy train-ppo-cartpole, fail a run at iteration 2, retry it in the UI; its id."""
    prefect_cli(["--no-prompt", "deploy", "--name", "train-ppo-cartpole"], env)
    overrides = [
        f"run.output_dir={out}",
        f"run.max_iterations={ITERATIONS}",
        "run.checkpoint_interval=2",
        "run.eval_interval=0",
        "rollout.num_steps=32",
        "eval.video=false",
    ]
    # fail at iteration 2, after the checkpoint of step 2 (off when the retry resumes)
    job_variables = {"env": {"RLPIPE_FAULTS": "exit:weight_sync@2"}}
    api_url = env["PREFECT_API_URL"]
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as api:
        deployment = api.read_deployment_by_name("train/train-ppo-cartpole")
        assert deployment.work_pool_name == "rlpipe-process"
        flow_run = api.create_flow_run_from_deployment(
            deployment.id,
            parameters={"overrides": overrides, "run_name": "deploy-retry"},
            job_variables=job_variables,
        )
        failed = wait_state(api, flow_run.id, lambda s: s.is_final())
        assert failed.state.is_failed(), failed.state
        manifest = (out / "deploy-retry" / "checkpoints" / "latest.json").read_text()
        assert '"step": 2' in manifest
        page = f"{ui}/runs/flow-run/{flow_run.id}"
        with chromium() as browser:  # closed while the run trains: its page redraws often
            retry_in_the_ui(browser, page)
            # the click's request is sent after the click returns: keep the page open until
            # the server has the new state (closing at once could drop it)
            wait_state(api, flow_run.id, lambda s: not s.is_failed(), timeout=60)
        done = wait_state(api, flow_run.id, lambda s: s.is_final())
        assert done.state.is_completed(), done.state
        with chromium() as browser:
            browser.get(page)
            wait_for(browser, lambda t: "Completed" in t and "Task runs" in t, "the retried run")
            time.sleep(1)  # the run graph (a canvas) draws after the page's text
            screenshot(browser, "prefect-retried-deployment-run")
        retried = [s for s in api.read_flow_run_states(flow_run.id) if s.name == "AwaitingRetry"]
        assert [s.message for s in retried] == ["Retry from the UI"], retried  # the button's
        (summary,) = api.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["deploy-retry-summary"]))
        )
        assert "| resumed from iteration | 2 |" in summary.data, summary.data
        assert done.run_count == 2
        children = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run.id])
            )
        )
        runs = sorted((c.name, c.state.type.value) for c in children)
        # iterations 0 and 1 ran once (before the failure); iteration 2 was stopped on purpose in
        # the first attempt (Cancelled: not retried), and the retry ran 2 and 3
        assert runs == [
            ("iteration-0", "COMPLETED"),
            ("iteration-1", "COMPLETED"),
            ("iteration-2", "CANCELLED"),
            ("iteration-2", "COMPLETED"),
            ("iteration-3", "COMPLETED"),
        ], runs
    return str(flow_run.id)


def cancel_in_the_ui(env: dict[str, str], out: Path, ui: str) -> None:
    """A deployment run cancelled with the UI's Cancel button stops like SIGTERM: its worker
    signals the process, which commits its checkpoint, releases its lease, marks its MLflow run
    KILLED and exits; the flow run ends Cancelled."""
    overrides = [
        f"run.output_dir={out}",
        "run.max_iterations=500",  # far more than it gets to run
        "run.checkpoint_interval=2",
        "run.eval_interval=0",
        "rollout.num_steps=32",
        "eval.video=false",
    ]
    api_url = env["PREFECT_API_URL"]
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as api:
        deployment = api.read_deployment_by_name("train/train-ppo-cartpole")
        flow_run = api.create_flow_run_from_deployment(
            deployment.id, parameters={"overrides": overrides, "run_name": "deploy-cancel"}
        )
        checkpoints = out / "deploy-cancel" / "checkpoints"
        deadline = time.monotonic() + 300
        while not (checkpoints / "latest.json").exists():
            assert time.monotonic() < deadline, "the run to cancel wrote no checkpoint"
            assert not api.read_flow_run(flow_run.id).state.is_final()
            time.sleep(0.5)
        page = f"{ui}/runs/flow-run/{flow_run.id}"
        with chromium() as browser:
            browser.get(page)
            wait_for(browser, lambda t: "train-deploy-cancel" in t and "Running" in t, "the run")
            click_text(browser, "Cancel")
            wait_for(browser, lambda t: "Cancel Flow Run" in t, "the cancel dialog")
            screenshot(browser, "prefect-cancel-deployment-run")
            confirm = "//*[@role='dialog']//button[normalize-space(.)='Confirm']"
            (button,) = [b for b in browser.find_elements(By.XPATH, confirm) if b.is_displayed()]
            button.click()
            cancelled_at = time.monotonic()
            # keep the page open until the server has the cancellation (see above)
            wait_state(api, flow_run.id, lambda s: s.is_cancelling() or s.is_final(), timeout=60)
        logs = (*out.parent.glob("*/logs/worker.log"), out / "deploy-cancel" / "rlpipe.log")
        done = wait_state(api, flow_run.id, lambda s: s.is_final(), timeout=180, logs=logs)
        assert done.state.is_cancelled(), done.state
        took = time.monotonic() - cancelled_at
        assert took < 90, f"the cancelled run took {took:.0f} s to stop"
    manifest = json.loads((checkpoints / "latest.json").read_text())
    assert (checkpoints / f"step_{manifest['step']:06d}" / "COMPLETE").exists()
    assert not (checkpoints / "lease.json").exists(), "the cancelled run kept its lease"
    run = MlflowClient(env["MLFLOW_TRACKING_URI"]).get_run(manifest["mlflow_run_id"])
    assert run.info.status == "KILLED", f"{run.info.status}\n{log_tails(logs)}"


def retry_in_the_ui(browser, url: str) -> None:
    """Open a failed flow run's page, press Retry, confirm in the dialog; the run restarts."""
    browser.get(url)
    wait_for(browser, lambda t: "train-deploy-retry" in t and "Failed" in t, "the failed run")
    screenshot(browser, "prefect-failed-deployment-run")
    click_text(browser, "Retry")
    wait_for(browser, lambda t: "Retry train-deploy-retry?" in t, "the retry dialog")
    confirm = "//*[@role='dialog']//button[normalize-space(.)='Retry']"
    (button,) = [b for b in browser.find_elements(By.XPATH, confirm) if b.is_displayed()]
    button.click()


def check_mlflow(env: dict[str, str], bucket: str, home: Path, flow_run_id: str) -> str:
    """One FINISHED run on the stack's server, each step once, artifacts in the bucket."""
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    experiment_id = client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id
    (run,) = client.search_runs([experiment_id], "tags.`rlpipe.run_name` = 'deploy-retry'")
    assert run.info.status == "FINISHED"
    assert run.data.tags["prefect.flow_run_id"] == flow_run_id
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "time/iteration"))
    assert steps == list(range(ITERATIONS))  # each iteration logged once, in one MLflow run
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied by the server
    config = "config/resolved_config.yaml"
    assert Path(client.download_artifacts(run.info.run_id, config, str(home.parent))).is_file()
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=env["MLFLOW_S3_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    prefix = f"mlflow/{experiment_id}/{run.info.run_id}/artifacts/"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert prefix + config in keys, keys
    assert not list((home / "mlflow").rglob("resolved_config.yaml"))  # nothing kept locally
    return run.info.run_id


def wait_for_scheduled_runs(
    env: dict[str, str], deployment_name: str, count: int, timeout: float
) -> list:
    """The ``count`` runs the schedule of ``deployment_name`` created, once all completed
    (a failed one fails the test at once)."""
    with (
        temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as api,
    ):
        deployment = api.read_deployment_by_name(deployment_name)
        deadline = time.monotonic() + timeout
        runs: list = []
        while time.monotonic() < deadline:
            runs = [
                r
                for r in api.read_flow_runs(
                    flow_run_filter=FlowRunFilter(deployment_id={"any_": [deployment.id]})
                )
                if r.auto_scheduled  # created by the schedule, not by hand
            ]
            assert not [r for r in runs if r.state and r.state.is_failed()], runs
            done = [r for r in runs if r.state and r.state.is_completed()]
            if len(done) >= count:
                return done
            time.sleep(1)
    raise AssertionError(f"{count} scheduled {deployment_name} runs not completed: {runs}")


def scheduled_evaluation(env: dict[str, str], out: Path, parent_run_id: str) -> None:
    """Deploy evaluate-latest on an hourly interval anchored a few seconds from now: the
    scheduler's first run evaluates the run (one run only: a short interval would start a
    new evaluation process every few seconds on a machine that is already busy)."""
    params = {"run_name": "deploy-retry", "output_dir": str(out), "episodes": 2}
    # the scheduler only creates runs after now: the anchor must still lie ahead when the
    # deploy command (10-20 s on a loaded 2-core machine) has registered the deployment
    anchor = datetime.now(UTC) + timedelta(seconds=25)
    prefect_cli(
        [
            *("--no-prompt", "deploy", "--name", "evaluate-latest"),
            *("--interval", "3600", "--anchor-date", anchor.isoformat()),
            *("--params", json.dumps(params)),
        ],
        env,
    )
    wait_for_scheduled_runs(env, "evaluate/evaluate-latest", 1, timeout=240)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    evaluations = client.search_runs(
        [client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id],
        "tags.`rlpipe.kind` = 'evaluation'",
    )
    assert evaluations and all(
        e.data.tags["mlflow.parentRunId"] == parent_run_id for e in evaluations
    )
    assert evaluations[0].data.metrics["eval/episodes"] == 2


def scheduled_training(env: dict[str, str], out: Path) -> None:
    """Two scheduled runs of train-ppo-cartpole, 25 s apart, whose ``run_name`` has
    ``{scheduled_timestamp}`` and whose overrides start from the registry's ``best``
    (``run.init_from``): each trains a new run and registers a new version. (The runs are
    scheduled through the API, at fixed times: that Prefect's scheduler creates runs from
    a deployment's schedule is the scheduled evaluation above.)"""
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    before = {v.version for v in client.search_model_versions(f"name = '{CARTPOLE_MODEL}'")}
    init_from = f"models:/{CARTPOLE_MODEL}@best"
    parameters = {
        "run_name": "nightly-{scheduled_timestamp}",
        "overrides": [
            f"run.output_dir={out}",
            "run.max_iterations=1",
            "run.eval_interval=1",
            "rollout.num_steps=32",
            "env.num_envs=4",
            "eval.num_episodes=2",
            "eval.video=false",
            f"run.init_from={init_from}",
        ],
    }
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)
    with (
        temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as api,
    ):
        deployment = api.read_deployment_by_name("train/train-ppo-cartpole")
        ids = [
            api.create_flow_run_from_deployment(
                deployment.id,
                parameters=parameters,
                state=Scheduled(scheduled_time=start + timedelta(seconds=25 * k)),
            ).id
            for k in range(2)
        ]
        done = [wait_state(api, i, lambda s: s.is_final()) for i in ids]
    assert all(r.state.is_completed() for r in done), [r.state for r in done]
    names = sorted(f"nightly-{r.expected_start_time:%Y%m%d-%H%M%S}" for r in done)
    experiment_id = client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id
    trained = {
        r.data.tags["rlpipe.run_name"]: r
        for r in client.search_runs([experiment_id], "tags.`rlpipe.run_name` LIKE 'nightly-%'")
    }
    assert sorted(trained) == names, (sorted(trained), names)  # a new run per scheduled time
    for name, run in trained.items():
        assert run.info.status == "FINISHED"
        assert json.loads(run.data.params["run.init_from"]) == init_from  # JSON-encoded
        assert f"{name}/init_model" in run.data.params["model.init_weights"]  # downloaded
    versions = client.search_model_versions(f"name = '{CARTPOLE_MODEL}'")
    new = {v.run_id for v in versions if v.version not in before}
    assert new == {r.info.run_id for r in trained.values()}  # each registered a version


def sweep_of_deployment_runs(env: dict[str, str], out: Path) -> None:
    """``rlpipe sweep --deployment``: each seed is a run of the train deployment, a subflow of
    the sweep's flow run; the report nests them under one MLflow parent run. (One seed: the
    sweep of several seeds, its statistics and parallel runs are checked in test_sweep.py.)"""
    rlpipe = Path(sys.executable).with_name("rlpipe")
    cmd = [str(rlpipe), "sweep", "--seeds", "0", "--name", "dep"]
    cmd += ["--deployment", "train/train-ppo-cartpole", f"run.output_dir={out}"]
    cmd += ["run.max_iterations=1", "run.eval_interval=1", "rollout.num_steps=32"]
    cmd += ["env.num_envs=4", "eval.num_episodes=2", "eval.video=false"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    api_url = env["PREFECT_API_URL"]
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    _, _, table = check_sweep_report(client, api_url, "dep", ["dep-s0"])
    assert "| base | 1/1 finished |" in table
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as api:
        (sweep_run,) = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(name={"any_": ["sweep-dep"]})
        )
        children = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[sweep_run.id])
            )
        )
        deployment = api.read_deployment_by_name("train/train-ppo-cartpole")
    assert [c.name for c in children] == ["train-dep-s0"]
    assert all(c.deployment_id == deployment.id and c.state.is_completed() for c in children)
    assert all("sweep:dep" in c.tags for c in children)
