"""A short training run against a real Prefect API, a local Ray cluster and MLflow (SQLite);
``flows/evaluate.py`` then reproduces its final evaluation from the last checkpoint. (That
the default preset solves CartPole is a learning curve: ``benchmarks/cartpole_solve.py``.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient
from PIL import Image
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    TaskRunFilter,
    TaskRunFilterFlowRunId,
)
from prefect.settings import PREFECT_API_URL, temporary_settings

from infra.checkpoint.export import policy_from_checkpoint
from infra.checkpoint.reader import locate_checkpoint
from infra.tracking.model_registry import load_registered_policy
from tests.integration.conftest import CARTPOLE_EXPERIMENT, run_evaluate, run_train

pytestmark = pytest.mark.integration
ITERATIONS = 3
#: Secrets that must not reach MLflow: an AWS key in the environment (also hidden inside a
#: config value) and a config key that names a token.
AWS_SECRET = "aws-secret-9f8e7d6c5b4a"
CONFIG_TOKEN = "tok-0123456789abcdef"


def _mlflow_run(output_dir: Path, run_name: str):
    client = MlflowClient(f"sqlite:///{output_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(CARTPOLE_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], f"tags.`rlpipe.run_name` = '{run_name}'")
    assert len(runs) == 1, runs
    return client, runs[0]


def test_train_flow_records_flows_tasks_and_mlflow(tmp_path: Path, train_env, prefect_api) -> None:
    out = run_train(
        tmp_path,
        train_env | {"AWS_SECRET_ACCESS_KEY": AWS_SECRET},
        "run.name=itest",
        f"run.max_iterations={ITERATIONS}",
        "run.checkpoint_interval=2",
        "run.eval_interval=2",
        "eval.num_episodes=4",
        "eval.num_tasks=2",
        "tracking.system_metrics_interval=1",
        "tracking.learning_curve=true",
        "eval.video=true",
        f"model.api_token={CONFIG_TOKEN}",
        f"model.endpoint=https://models.invalid/x?sig={AWS_SECRET}",
    )
    assert "MLflow run id" in out and "checkpoint dir" in out
    assert "registered from: the best checkpoint (step" in " ".join(out.split())
    client, run = _mlflow_run(tmp_path, "itest")
    flow_run_id = run.data.tags["prefect.flow_run_id"]
    assert run.data.tags["prefect.flow_run_url"].startswith("http://127.0.0.1:")
    assert run.data.tags["prefect.flow_run_url"].endswith(f"/flow-run/{flow_run_id}")
    assert len(run.data.tags["rlpipe.git_commit"].removesuffix("-dirty")) == 40

    # --- Prefect: the train flow, one child flow per iteration, every step's task runs.
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        train_run = api.read_flow_run(flow_run_id)
        assert train_run.name == "train-itest"
        assert train_run.state.is_completed()
        children = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])
            )
        )
        assert sorted(c.name for c in children) == [f"iteration-{i}" for i in range(ITERATIONS)]
        assert all(c.state.is_completed() for c in children)
        # --- Prefect UI content: tags on the run and its children, progress and summary.
        run_tags = {"rlpipe", "preset:ppo_cartpole", "algorithm:ppo", "run:itest"}
        assert run_tags <= set(train_run.tags), train_run.tags
        assert all(run_tags <= set(c.tags) for c in children)
        artifacts = {
            a.key: a
            for a in api.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
                )
            )
        }
        assert artifacts["itest-progress"].type == "progress"
        assert float(artifacts["itest-progress"].data) == 100.0
        summary = artifacts["itest-summary"]
        assert summary.type == "markdown"
        assert run.info.run_id in summary.data and "checkpoints" in summary.data
        assert "| iterations | 3 |" in summary.data
        expected = {
            f"{s}-{i}"
            for i in range(ITERATIONS)
            for s in ("weight_sync", "rollout", "reward", "advantage", "update")
        }
        expected |= {"checkpoint-1", "checkpoint-2", "eval_episodes-1-0", "eval_episodes-1-1"}
        expected |= {"eval_video-2-0"}
        names: set[str] = set()
        deadline = time.monotonic() + 30  # task runs arrive through Prefect's event pipeline
        while time.monotonic() < deadline and not expected <= names:
            task_runs = api.read_task_runs(
                task_run_filter=TaskRunFilter(
                    flow_run_id=TaskRunFilterFlowRunId(any_=[c.id for c in children])
                )
            )
            names = {t.name for t in task_runs}
            time.sleep(1)
        assert expected <= names, f"missing task runs: {sorted(expected - names)}"
        # the run's tags stay on flow runs: a tagged task run costs a concurrency API call
        assert not any(run_tags & set(t.tags) for t in task_runs), [t.tags for t in task_runs]

    # --- MLflow: params, per-iteration metrics, config and checkpoint artifacts.
    assert run.data.params["actor.lr"] == "0.0025"
    assert run.data.params["env.env_id"] == '"CartPole-v1"'
    assert run.info.status == "FINISHED"
    for key in (
        "time/orchestration",
        "time/rollout",
        "time/update",
        "train/policy_loss",
        "env/total_steps",
    ):
        history = client.get_metric_history(run.info.run_id, key)
        assert sorted(m.step for m in history) == list(range(ITERATIONS)), key
    evals = client.get_metric_history(run.info.run_id, "eval/return_mean")
    assert sorted(m.step for m in evals) == [1, 2]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config", "checkpoints"} <= artifacts
    ckpt = {a.path for a in client.list_artifacts(run.info.run_id, "checkpoints")}
    assert "checkpoints/step_000003" in ckpt
    files = {
        a.path for a in client.list_artifacts(run.info.run_id, "checkpoints/step_000003/actor_0")
    }
    assert "checkpoints/step_000003/actor_0/model.safetensors" in files
    _check_mlflow_depth(client, run, tmp_path)
    _check_evaluate_reproduces_the_final_evaluation(client, run, tmp_path, train_env)


def _check_evaluate_reproduces_the_final_evaluation(
    client: MlflowClient, run, output_dir: Path, env: dict[str, str]
) -> None:
    """Same weights, same fixed evaluation seeds, deterministic actions: ``evaluate.py`` on
    the last checkpoint (step 3) gets the mean return of the evaluation after iteration 3."""
    out = run_evaluate("itest", output_dir, env, "--episodes", "4")
    summary = json.loads(out[out.index("{") :])
    assert summary["step"] == ITERATIONS and summary["mlflow_run_id"]
    final = max(
        client.get_metric_history(run.info.run_id, "eval/return_mean"), key=lambda m: m.step
    )
    assert summary["eval/return_mean"] == final.value, out[-3000:]


def _check_mlflow_depth(client: MlflowClient, run, output_dir: Path) -> None:
    """System metrics, evaluation GIF, learning curve, no secrets, registered model."""
    run_id = run.info.run_id
    history = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
    assert len(history) >= 1 and "system/system_memory_usage_megabytes" in run.data.metrics

    local = Path(client.download_artifacts(run_id, "", str(output_dir / "artifacts")))
    gif = Image.open(local / "eval/videos/episode_000002.gif")
    assert gif.format == "GIF" and gif.n_frames > 1
    png = Image.open(local / "plots/learning_curve.png")
    assert png.format == "PNG" and png.width > 400
    assert client.get_metric_history(run_id, "time/eval_video")[0].step == 2

    # --- no secret values in params, the resolved config or any JSON/YAML artifact
    texts = [json.dumps(run.data.params)]
    texts += [p.read_text() for p in local.rglob("*") if p.suffix in {".json", ".yaml"}]
    assert (local / "config/resolved_config.yaml").is_file()
    assert run.data.params["model.api_token"] == "***"
    for text in texts:
        assert AWS_SECRET not in text and CONFIG_TOKEN not in text

    # --- model registry: the checkpoint of the best evaluation, aliases, loadable policy
    tracking_uri = f"sqlite:///{output_dir / 'mlflow.db'}"
    registry = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    name = f"rlpipe-{CARTPOLE_EXPERIMENT}"
    version = registry.get_model_version_by_alias(name, "best")
    assert set(version.aliases) == {"best", "newest"} and version.run_id == run_id
    evals = client.get_metric_history(run_id, "eval/return_mean")
    assert sorted(m.step for m in evals) == [1, 2]
    best = max(evals, key=lambda m: (m.value, -m.step))  # the first of equal bests
    assert version.tags["checkpoint_step"] == str(best.step + 1)
    assert version.tags["eval_step"] == str(best.step)
    assert version.tags["task"] == run.data.tags["rlpipe.task"] == "CartPole-v1"
    assert version.tags["eval_protocol"] == run.data.tags["rlpipe.eval_protocol"]
    # lineage: data, code, flow run, warm start (none here), config
    assert version.tags["prefect_flow_run"] == run.data.tags["prefect.flow_run_id"]
    assert version.tags["git_commit"] == run.data.tags["rlpipe.git_commit"]
    assert len(version.tags["data_fingerprint"]) == 12 and version.tags["parent_sft_run"] == "-"
    assert version.tags["config_hash"] == run.data.tags["rlpipe.config_hash"]
    # a model-training experiment: the MLflow UI opens it in that view, not the GenAI one
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert float(version.tags["eval_score"]) == best.value
    assert run.data.tags["rlpipe.registered_model"] == f"models:/{name}/{version.version}"
    policy, meta = load_registered_policy(f"models:/{name}@best", tracking_uri)
    assert meta["source"]["step"] == best.step + 1 and meta["model"]["api_token"] == "***"
    store = output_dir / "itest" / "checkpoints"
    trained, _, _ = policy_from_checkpoint(locate_checkpoint(store, step=best.step + 1))
    obs = {"states": np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)}
    with torch.no_grad():
        for mode in ("eval", "train"):
            got = policy.predict_action_batch(
                obs, mode=mode, compute_values=True, generator=torch.Generator().manual_seed(1)
            )
            want = trained.predict_action_batch(
                obs, mode=mode, compute_values=True, generator=torch.Generator().manual_seed(1)
            )
            np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
            for key in ("prev_logprobs", "prev_values"):
                np.testing.assert_array_equal(np.asarray(got[1][key]), np.asarray(want[1][key]))
