"""Resuming against another MLflow store: the checkpoint's run id is not there, so a new
run continues it, linked by tags (two SQLite stores)."""

from __future__ import annotations

import logging
from pathlib import Path

from mlflow.tracking import MlflowClient

from infra.driver.session import TrainSession
from infra.tracking import MlflowTracker
from infra.tracking.mlflow_tracker import PREVIOUS_RUN_TAG, PREVIOUS_URI_TAG
from rl_core.config import load_config


def _store(tmp_path: Path, name: str) -> str:
    (tmp_path / name).mkdir()
    return f"sqlite:///{tmp_path / name / 'mlflow.db'}"


def test_a_run_missing_from_the_store_continues_in_a_linked_new_run(tmp_path, caplog) -> None:
    first_uri, second_uri = _store(tmp_path, "local"), _store(tmp_path, "server")
    first = MlflowTracker(first_uri, "exp", "run", artifact_location=str(tmp_path / "a1"))
    first.finish()

    caplog.set_level(logging.WARNING, logger="infra.tracking.mlflow_tracker")
    previous = "https://alice:pw-123456@old.example.invalid"
    second = MlflowTracker(
        second_uri,
        "exp",
        "run",
        run_id=first.run_id,
        tags={"rlpipe.run_name": "run"},
        artifact_location=str(tmp_path / "a2"),
        previous_tracking_uri=previous,
    )
    second.finish()

    assert not second.resumed and second.previous_run_id == first.run_id
    assert second.run_id != first.run_id
    run = MlflowClient(second_uri).get_run(second.run_id)
    assert run.data.tags[PREVIOUS_RUN_TAG] == first.run_id
    assert run.data.tags[PREVIOUS_URI_TAG] == "https://***@old.example.invalid"
    assert run.data.tags["rlpipe.run_name"] == "run"
    (message,) = [
        r.getMessage() for r in caplog.records if r.name == "infra.tracking.mlflow_tracker"
    ]
    assert first.run_id in message and second.run_id in message and "pw-123456" not in message


def test_the_same_store_reattaches_the_run(tmp_path) -> None:
    uri = _store(tmp_path, "local")
    first = MlflowTracker(uri, "exp", "run", artifact_location=str(tmp_path / "a"))
    again = MlflowTracker(uri, "exp", "run", run_id=first.run_id, previous_tracking_uri=uri)
    assert again.resumed and again.run_id == first.run_id and again.previous_run_id is None
    assert PREVIOUS_RUN_TAG not in MlflowClient(uri).get_run(first.run_id).data.tags


def test_the_session_links_the_checkpoints_run_and_store(tmp_path) -> None:
    old_uri, new_uri = _store(tmp_path, "local"), _store(tmp_path, "server")
    old = MlflowTracker(old_uri, "ppo_cartpole", "r", artifact_location=str(tmp_path / "a"))
    cfg = load_config(
        "ppo_cartpole",
        [f"run.output_dir={tmp_path / 'out'}", "run.name=r", f"tracking.tracking_uri={new_uri}"],
    )
    session = TrainSession.__new__(TrainSession)  # only what opening the tracker reads
    session.cfg, session.output_dir, session.config_hash = cfg, tmp_path / "out", "h"
    session.supervised = False
    session.manifest = {"mlflow_run_id": old.run_id, "mlflow_tracking_uri": old_uri}
    tracker = session._open_tracker({})
    tracker.finish()

    run = MlflowClient(new_uri).get_run(tracker.run_id)
    assert run.data.tags[PREVIOUS_RUN_TAG] == old.run_id
    assert run.data.tags[PREVIOUS_URI_TAG] == old_uri
    assert run.data.params["run.name"] == '"r"'  # a new run: params logged afresh
    assert tracker.masked_tracking_uri == new_uri
