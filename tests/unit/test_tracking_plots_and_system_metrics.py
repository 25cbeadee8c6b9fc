"""Learning-curve plot from a run's metric history; MLflow system metrics on a run id."""

from __future__ import annotations

import io
import time

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from PIL import Image

from infra.tracking.mlflow_tracker import MlflowTracker
from infra.tracking.plots import learning_curve_png, select_panels


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{root / 'mlflow.db'}"


def test_select_panels() -> None:
    keys = [
        "eval/return_mean",
        "eval/return_std",
        "eval/pass_at_4",
        "env/episode_return_mean",
        "train/policy_loss",
        "train/value_loss",
        "train/sft_loss",
        "train/lr",
        "time/update",
    ]
    panels = {title: keys for title, _, keys in select_panels(keys)}
    assert panels == {
        "Evaluation": ["eval/pass_at_4"],  # scores on one scale: not eval/return_mean
        "Training": ["env/episode_return_mean"],
        "Policy loss": ["train/policy_loss", "train/sft_loss"],
        "Value loss": ["train/value_loss"],
    }
    assert select_panels(["eval/return_mean", "rollout/reward_mean"]) == [
        ("Evaluation", "score", ["eval/return_mean"]),
        ("Training", "return / reward", ["rollout/reward_mean"]),
    ]
    assert select_panels(["time/update"]) == []


def test_learning_curve_png(tracking_uri) -> None:
    client = MlflowClient(tracking_uri)
    run_id = client.create_run(client.create_experiment("plots")).info.run_id
    assert learning_curve_png(client, run_id, "empty") is None
    now = int(time.time() * 1000)
    metrics = [Metric("train/policy_loss", 1.0 / (s + 1), now, s) for s in range(10)]
    metrics += [Metric("eval/return_mean", 10.0 * s, now, s) for s in (4, 9)]
    client.log_batch(run_id, metrics=metrics)
    png = learning_curve_png(client, run_id, "test run")
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (720, 320)  # two panels of 3.6 x 3.2 in


def test_system_metrics_on_an_explicit_run_id(tracking_uri) -> None:
    tracker = MlflowTracker(tracking_uri, "system", "sys-run")
    tracker.start_system_metrics(0.2)
    tracker.start_system_metrics(0.2)  # idempotent
    time.sleep(1.0)
    tracker.finish()
    run = tracker.client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED"
    keys = set(run.data.metrics)
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= keys
    history = tracker.client.get_metric_history(tracker.run_id, "system/cpu_utilization_percentage")
    assert len(history) >= 2
    # resumed: the monitor continues the step numbering of the re-attached run
    resumed = MlflowTracker(tracking_uri, "system", "sys-run", run_id=tracker.run_id)
    resumed.start_system_metrics(0.2)
    time.sleep(0.6)
    resumed.finish("FAILED")
    steps = [
        m.step
        for m in resumed.client.get_metric_history(
            tracker.run_id, "system/cpu_utilization_percentage"
        )
    ]
    assert len(steps) == len(set(steps)) > len(history)
