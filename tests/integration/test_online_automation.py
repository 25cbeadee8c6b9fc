"""Event-driven online training on the local stack: ``rlpipe serve`` serves a run's policy
and emits ``rlpipe.feedback.ready`` to the stack's Prefect server for each batch of feedback;
the ``train-online-on-feedback`` deployment's automation starts a train flow run (on the
stack's worker) that trains on exactly that batch, gives the endpoint the new weights and
completes; the next users are answered by the new version. The triggered flow run is
opened in the Prefect UI (headless Chromium)."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter
from prefect.settings import PREFECT_API_URL, temporary_settings

from kinds.online.deployment import read_weights
from kinds.online.simulated_user import SimulatedUser
from rl_core.data.arithmetic import ArithmeticTask
from rl_core.online.simulated_user import QuestionPlan
from tests.browser import chromium, screenshot, wait_for
from tests.integration.conftest import ROOT
from tests.integration.online_preset import ProcessOutput, start_process, tiny_online_preset
from tests.integration.stack_helpers import base_env, prefect_cli, running_stack, stack_env

pytestmark = pytest.mark.integration
RUN = "online-auto"
BATCH = 8
DEPLOYMENT = "train/train-online-on-feedback"


@contextmanager
def serving(preset: Path, out: Path, env: dict[str, str]) -> Iterator[tuple[str, ProcessOutput]]:
    """``flows/serve.py`` for the run; yields its URL and its output."""
    cmd = [sys.executable, str(ROOT / "flows" / "serve.py"), "--config", str(preset)]
    proc, output = start_process([*cmd, f"run.output_dir={out}"], env)
    try:
        url = output.wait_for(rf"serving {RUN} \(weight version 0\) at (http://\S+)/v1").group(1)
        yield url, output
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    assert proc.returncode == 0, output.text(60)


def completed_triggered_runs(api, count: int, worker_logs: list[Path], timeout: float = 420):
    """The deployment's flow runs once ``count`` completed (a failed one fails at once)."""
    deployment = api.read_deployment_by_name(DEPLOYMENT)
    deadline = time.monotonic() + timeout
    runs: list = []
    while time.monotonic() < deadline:
        runs = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(deployment_id={"any_": [deployment.id]})
        )
        failed = [r for r in runs if r.state and (r.state.is_failed() or r.state.is_crashed())]
        tails = "".join(p.read_text()[-3000:] for p in worker_logs if p.is_file())
        assert not failed, f"{[(r.name, r.state) for r in failed]}\n{tails}"
        done = [r for r in runs if r.state and r.state.is_completed()]
        if len(done) >= count:
            return sorted(done, key=lambda r: r.created)
        time.sleep(1)
    tails = "".join(p.read_text()[-3000:] for p in worker_logs if p.is_file())
    raise AssertionError(f"{count} triggered runs not completed: {runs}\n{tails}")


def claimed_batches(db: Path) -> dict[int, int]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "select batch, count(*) from feedback where run = ? group by batch", (RUN,)
        ).fetchall()
    return dict(rows)


def test_each_batch_of_feedback_starts_a_training_run_that_updates_the_endpoint(
    tmp_path: Path,
) -> None:
    preset = tiny_online_preset(tmp_path / "preset", RUN, BATCH, iterations=20)
    out = tmp_path / "out"
    env = base_env(tmp_path)
    with running_stack(tmp_path, env) as state:
        home = Path(state["home"])
        env.update(stack_env(home, env))
        worker_logs = list(home.glob("**/worker*.log"))
        prefect_cli(["--no-prompt", "deploy", "--name", "train-online-on-feedback"], env)
        plan = QuestionPlan(ArithmeticTask().heldout(64), noise=0.0, seed=3)
        with (
            temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
            get_client(sync_client=True) as api,
            serving(preset, out, env) as (url, said),
        ):
            user = SimulatedUser(url, plan, model=RUN)
            first = user.run(BATCH)  # one batch of feedback: the event, the first run
            assert {t.weight_version for t in first} == {0}
            (run_a,) = completed_triggered_runs(api, 1, worker_logs)
            weights = out / RUN / "served" / "current.json"
            assert read_weights(weights).version == 1, said.text(40)
            second = user.run(BATCH)  # answered by the version the run trained
            assert {t.weight_version for t in second} == {1}
            run_a, run_b = completed_triggered_runs(api, 2, worker_logs)
            user.close()
            assert read_weights(weights).version == 2
            for run in (run_a, run_b):
                assert run.created_by and run.created_by.type == "AUTOMATION", run.created_by
                assert run.parameters["run_name"] == RUN
                assert "online.server=external" in run.parameters["overrides"]
            # each flow run trained exactly the batch that was waiting
            assert claimed_batches(out / RUN / "feedback.db") == {0: BATCH, 1: BATCH}
            ui = state["prefect_ui"]
            with chromium() as browser:
                browser.get(f"{ui}/runs/flow-run/{run_b.id}")
                wait_for(
                    browser,
                    lambda t: (
                        f"train-{RUN}" in t
                        and "Completed" in t
                        and "train-online-on-feedback__automation" in t
                    ),  # the "Automation" field
                    "the triggered train flow run and the automation that started it",
                )
                time.sleep(1)  # the run graph (a canvas) draws after the page's text
                screenshot(browser, "prefect-feedback-triggered-run")
        client = MlflowClient(state["mlflow_ui"])
        experiments = [e.experiment_id for e in client.search_experiments()]
        (mlflow_run,) = client.search_runs(experiments, f"tags.`rlpipe.run_name` = '{RUN}'")
        history = client.get_metric_history(mlflow_run.info.run_id, "online/records")
        assert [m.step for m in history] == [0, 1]  # both flow runs: the run's one MLflow run
