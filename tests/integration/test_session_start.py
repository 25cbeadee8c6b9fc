"""The MLflow run opens while the worker groups start; a failure of either stops the other."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from infra.driver import session as session_module
from infra.driver.session import TrainSession
from rl_core.config import load_config
from tests.integration.conftest import CARTPOLE_EXPERIMENT

pytestmark = pytest.mark.integration


class Boom(RuntimeError):
    pass


def bare_session(tmp_path) -> TrainSession:
    """A session object with what the start needs (no lease, no store)."""
    cfg = load_config("ppo_cartpole", [f"run.output_dir={tmp_path}", "run.name=start"])
    s = TrainSession.__new__(TrainSession)
    s.cfg, s.output_dir, s.manifest, s.config_hash = cfg, tmp_path, None, "hash"
    s.supervised = False
    return s


def only_run(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name(CARTPOLE_EXPERIMENT).experiment_id])
    return run


def test_workers_failing_to_start_end_the_mlflow_run_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(session_module.ray_cluster, "connect", lambda *a: {"CPU": 2})

    def no_workers(cfg):
        raise Boom("worker start failed")

    monkeypatch.setattr(session_module, "make_runtime", no_workers)
    with pytest.raises(Boom):
        bare_session(tmp_path)._start_tracker_and_workers({})
    assert only_run(tmp_path).info.status == "FAILED"


def test_mlflow_failing_to_open_stops_the_started_workers(tmp_path, monkeypatch):
    stopped = []

    class Runtime:
        def shutdown(self):
            stopped.append(True)

    monkeypatch.setattr(session_module.ray_cluster, "connect", lambda *a: {"CPU": 2})
    monkeypatch.setattr(session_module, "make_runtime", lambda cfg: Runtime())

    def broken_tracker(self, tags):
        raise Boom("tracking store unreachable")

    monkeypatch.setattr(TrainSession, "_open_tracker", broken_tracker)
    with pytest.raises(Boom, match="unreachable"):
        bare_session(tmp_path)._start_tracker_and_workers({})
    assert stopped == [True]


def test_both_start_and_the_run_is_open(tmp_path, monkeypatch):
    monkeypatch.setattr(session_module.ray_cluster, "connect", lambda *a: {"CPU": 2})
    runtime = object()
    monkeypatch.setattr(session_module, "make_runtime", lambda cfg: runtime)
    tracker, got = bare_session(tmp_path)._start_tracker_and_workers({"k": "v"})
    assert got is runtime
    run = only_run(tmp_path)
    assert run.info.run_id == tracker.run_id and run.info.status == "RUNNING"
    assert run.data.tags["k"] == "v" and run.data.params["run.name"] == json.dumps("start")
    tracker.finish("FINISHED")
