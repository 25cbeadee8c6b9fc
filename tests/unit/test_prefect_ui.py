"""Names and texts of what a run shows in the Prefect UI (no server needed)."""

from __future__ import annotations

from flows.prefect_ui import artifact_key, mlflow_run_link, run_tags, summary_markdown
from rl_core.config import load_config


def test_artifact_keys_are_valid_prefect_keys():
    assert artifact_key("ppo-cartpole", "progress") == "ppo-cartpole-progress"
    assert artifact_key("My_Run.v2", "summary") == "my-run-v2-summary"
    assert artifact_key("__", "summary") == "run-summary"


def test_run_tags_name_preset_algorithm_and_run():
    cfg = load_config("grpo_arith", ["run.name=r1"])
    assert run_tags(cfg) == ["rlpipe", "preset:grpo_arith", "algorithm:grpo", "run:r1"]


def test_mlflow_link_over_http_and_hint_otherwise():
    link = mlflow_run_link("http://127.0.0.1:5000/", "3", "abc")
    assert (
        link
        == "[abc](http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning)"
    )
    local = mlflow_run_link("sqlite:///x/mlflow.db", "3", "abc")
    assert "`abc`" in local and "mlflow ui --backend-store-uri sqlite:///x/mlflow.db" in local
    assert mlflow_run_link("sqlite:///x", "1", None) == "MLflow tracking disabled"


def test_summary_lists_metrics_and_locations():
    cfg = load_config("ppo_cartpole", ["run.name=s"])
    result = {
        "iterations": 12,
        "env_steps": 1024,
        "initial_eval_return": None,
        "last_eval_return": 480.123456,
        "best_eval_return": 500.0,
        "solved": True,
        "mlflow_run_id": "r9",
        "tracking_uri": "http://127.0.0.1:5000",
        "checkpoint_dir": "/o/s/checkpoints",
    }
    text = summary_markdown(cfg, result, "7")
    assert "| iterations | 12 |" in text
    assert "| last eval | 480.1 |" in text
    assert "eval before training" not in text  # None rows are left out
    assert "(http://127.0.0.1:5000/#/experiments/7/runs/r9?workflowType=machine_learning)" in text
    assert "`/o/s/checkpoints`" in text


def test_summary_masks_credentials_and_links_without_them():
    cfg = load_config("ppo_cartpole", ["run.name=s"])
    result = {
        "iterations": 1,
        "mlflow_run_id": "r9",
        "tracking_uri": "https://alice:pw-123456@mlflow.example.invalid",
        "checkpoint_dir": "s3://bucket/ckpts/s?X-Amz-Signature=abcdef",
    }
    text = summary_markdown(cfg, result, "7")
    assert "pw-123456" not in text and "abcdef" not in text
    assert (
        "(https://mlflow.example.invalid/#/experiments/7/runs/r9?workflowType=machine_learning)"
        in text
    )
    assert "`s3://bucket/ckpts/s?X-Amz-Signature=***`" in text
    local = mlflow_run_link("postgresql://u:pw-123456@db/mlflow", "1", "r")
    assert "pw-123456" not in local and "postgresql://***@db/mlflow" in local
