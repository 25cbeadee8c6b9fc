"""``rlpipe sweep``: runs over seeds nest under an MLflow parent run that gets mean ± std
curves and a table; the Prefect UI gets the table as an artifact."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.settings import PREFECT_API_URL, temporary_settings

from tests.integration.conftest import CARTPOLE_EXPERIMENT, run_process

pytestmark = pytest.mark.integration


def test_a_seed_sweep_nests_its_runs_and_reports_them(
    tmp_path: Path, train_env: dict[str, str], prefect_api: str
) -> None:
    rlpipe = Path(sys.executable).parent / "rlpipe"  # the console entry point
    cmd = [str(rlpipe), "sweep", "--config", "ppo_cartpole", "--seeds", "0-1", "--name", "two"]
    small = ["run.max_iterations=2", "run.eval_interval=1", "env.num_envs=4"]
    small += ["rollout.num_steps=32", "eval.num_episodes=2", f"run.output_dir={tmp_path}"]
    proc = run_process([*cmd, *small], train_env, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(CARTPOLE_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("rlpipe.sweep") == "two"]
    children = sorted(
        (r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id),
        key=lambda r: r.info.run_name,
    )
    assert [c.info.run_name for c in children] == ["two-s0", "two-s1"]
    assert [c.data.params["run.seed"] for c in children] == ["0", "1"]
    assert parent.info.status == "FINISHED" and parent.data.params["sweep.seeds"] == "0,1"
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "sweep.md" in files
    assert "plots/sweep.png" in {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    table = client.download_artifacts(parent.info.run_id, "sweep.md", str(tmp_path))
    text = Path(table).read_text()
    assert "| base | 2/2 finished |" in text and "| two-s1 | 1 | 0 |" in text
    assert (tmp_path / "sweep-two" / "two-s0.log").is_file()  # each run's own output

    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        (artifact,) = api.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["two-sweep"]))
        )
    assert "| base | 2/2 finished |" in artifact.data
