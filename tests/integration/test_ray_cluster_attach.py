"""A training run attaches to a separately started Ray head (``ray start --head`` on
127.0.0.1, own temp dir and ports) and its workers get the driver's environment through
``runtime_env``, not by inheriting it: the head is started without any of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from infra.ops.ray_head import LocalRayHead
from infra.processes import session_pids
from tests.integration.conftest import ROOT, find_run, run_train

pytestmark = pytest.mark.integration
FIXTURE_MODULES = ROOT / "tests" / "fixtures" / "ext_modules"


def test_training_runs_on_a_separately_started_ray_head(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    probe_dir = tmp_path / "probes"
    tracking_uri = f"sqlite:///{tmp_path / 'tracking' / 'mlflow.db'}"
    (tmp_path / "tracking").mkdir()
    head = LocalRayHead(num_cpus=2)
    try:
        head.wait_ready()
        head_processes = session_pids(head.process.pid)
        env = {
            **train_env,
            "RAY_ADDRESS": head.address,
            "RLPIPE_EXT_MODULE": "ext_env_probe",
            "PYTHONPATH": str(FIXTURE_MODULES),
            "MLFLOW_TRACKING_URI": tracking_uri,
        }
        out = run_train(
            tmp_path / "out",
            env,
            "run.name=on-head",
            "run.max_iterations=2",
            "run.eval_interval=0",
            "env.env_type=env_probe",
            f"env.kwargs.probe_dir={probe_dir}",
            "env.num_envs=4",
        )
        assert f"connecting to Ray ({head.address})" in out
        assert len(head_processes) >= 3  # gcs, raylet, agents: the head was really up
    finally:
        head.stop()
    assert session_pids(head.process.pid) == [], "the head left processes behind"

    records = [json.loads(p.read_text()) for p in probe_dir.glob("*.json")]
    in_workers = [r for r in records if r["actor_id"]]
    assert in_workers, f"no env was built inside a Ray actor: {records}"
    for record in in_workers:
        assert record["gcs_address"] == head.address
        assert record["env"] == {
            "OMP_NUM_THREADS": "1",
            "RLPIPE_EXT_MODULE": "ext_env_probe",
            "MLFLOW_TRACKING_URI": tracking_uri,
        }
        assert record["torch_threads"] == 1

    # The run logged to the MLflow store named by MLFLOW_TRACKING_URI, not the default one
    # (which the test seeded empty: it stays so).
    default = MlflowClient(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}")
    experiments = [e.experiment_id for e in default.search_experiments()]
    assert default.search_runs(experiments) == []
    client = MlflowClient(tracking_uri)
    run = find_run(client, "on-head")
    assert run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "train/policy_loss")
    assert sorted(m.step for m in history) == [0, 1]
