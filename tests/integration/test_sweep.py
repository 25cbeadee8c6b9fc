"""``rlpipe sweep``: runs over seeds nest under an MLflow parent run that gets mean ± std
curves and a table; the Prefect UI gets the table as an artifact."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import run_process
from tests.sweep_checks import check_sweep_report

pytestmark = pytest.mark.integration


def test_a_seed_sweep_nests_its_runs_and_reports_them(
    tmp_path: Path, train_env: dict[str, str], prefect_api: str
) -> None:
    rlpipe = Path(sys.executable).parent / "rlpipe"  # the console entry point
    cmd = [str(rlpipe), "sweep", "--config", "ppo_cartpole", "--seeds", "0-1", "--name", "two"]
    small = ["run.max_iterations=2", "run.eval_interval=1", "env.num_envs=4"]
    small += ["rollout.num_steps=32", "eval.num_episodes=2", "eval.video=false"]
    small += [f"run.output_dir={tmp_path}"]
    proc = run_process([*cmd, *small], train_env, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent, children, table = check_sweep_report(client, prefect_api, "two", ["two-s0", "two-s1"])
    assert [c.data.params["run.seed"] for c in children] == ["0", "1"]
    assert parent.data.params["sweep.seeds"] == "0,1"
    assert "| base | 2/2 finished |" in table and "| two-s1 | 1 | 0 |" in table
    logged = client.download_artifacts(parent.info.run_id, "sweep.md", str(tmp_path))
    assert Path(logged).read_text() in table  # the Prefect artifact adds where the plot is
    assert (tmp_path / "sweep-two" / "two-s0.log").is_file()  # each run's own output
