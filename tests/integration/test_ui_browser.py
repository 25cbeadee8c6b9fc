"""The Prefect UI and the MLflow UI, opened in a real headless Chromium after a short run.

A small CartPole run trains against the test session's Prefect server; ``mlflow ui`` serves
its store. The pages a user opens are checked for what they must show, and screenshots are
saved under ``outputs/ui-screenshots/`` (the docs use them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from infra.tracking.mlflow_tracker import MODEL_TRAINING_VIEW, mlflow_run_url
from tests.browser import chromium, click_text, screenshot, wait_for
from tests.browser import mlflow_ui as serve_mlflow_ui
from tests.integration.conftest import CARTPOLE_MODEL, SMALL_RUN

pytestmark = pytest.mark.integration
RUN = SMALL_RUN


@pytest.fixture(scope="module")
def trained(small_cartpole_run: dict[str, Any], prefect_api: str) -> dict[str, Any]:
    """The session's finished 3-iteration run (its output folder, MLflow run and flow run)."""
    return {**small_cartpole_run, "ui": prefect_api.removesuffix("/api")}


@pytest.fixture(scope="module")
def mlflow_ui(trained: dict[str, Any]) -> Iterator[str]:
    """``mlflow ui`` on 127.0.0.1 over the run's store."""
    with serve_mlflow_ui(trained["out"]) as url:
        yield url


def test_prefect_ui_shows_the_iterations_and_the_summary(trained: dict[str, Any]) -> None:
    flow_run_id = trained["run"].data.tags["prefect.flow_run_id"]
    with chromium() as browser:
        browser.get(f"{trained['ui']}/runs/flow-run/{flow_run_id}")
        wait_for(browser, lambda t: f"train-{RUN}" in t and "Completed" in t, "the train flow run")
        click_text(browser, "Subflow Runs")
        wait_for(browser, lambda t: all(f"iteration-{i}" in t for i in range(3)), "iterations")
        screenshot(browser, "prefect-flow-run-iterations")
        click_text(browser, "Artifacts")
        wait_for(
            browser,
            lambda t: f"{RUN}-summary" in t and f"{RUN}-progress" in t,
            "the progress and summary artifacts",
        )
        screenshot(browser, "prefect-flow-run-artifacts")


def test_mlflow_ui_shows_metrics_curve_and_the_best_model(
    trained: dict[str, Any], mlflow_ui: str
) -> None:
    run = trained["run"]
    experiment = run.info.experiment_id
    with chromium() as browser:
        # the link rlpipe records (summaries, rlpipe runs) opens the model-training view
        browser.get(mlflow_run_url(mlflow_ui, experiment, run.info.run_id))
        text = wait_for(browser, lambda t: RUN in t and "eval/return_mean" in t, "run metrics")
        assert "Evaluation runs" not in text  # the GenAI view's
        screenshot(browser, "mlflow-run-overview")
        click_text(browser, "Artifacts")
        click_text(browser, "plots")
        wait_for(browser, lambda t: "learning_curve.png" in t, "the learning curve artifact")
        click_text(browser, "learning_curve.png")
        screenshot(browser, "mlflow-run-learning-curve")
        model = CARTPOLE_MODEL
        browser.get(f"{mlflow_ui}/#/models/{model}?{MODEL_TRAINING_VIEW}")
        wait_for(browser, lambda t: model in t and "best" in t, "the registered model's alias")
        screenshot(browser, "mlflow-registered-model")
