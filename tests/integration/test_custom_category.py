"""A kind of training added from outside rlpipe (examples/bandit_category): one module whose
one ``register_kind`` call names a config, a model and a runtime trains through the real
train flow and evaluate flow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import ROOT, run_evaluate, run_train

pytestmark = pytest.mark.integration
EXAMPLE = ROOT / "examples" / "bandit_category"


@pytest.fixture()
def bandit_env(train_env: dict[str, str]) -> dict[str, str]:
    return {**train_env, "RLPIPE_EXT_MODULE": "bandit_category", "PYTHONPATH": str(EXAMPLE)}


def test_own_category_trains_evaluates_and_resumes(tmp_path: Path, bandit_env) -> None:
    args = (
        "--config",
        str(EXAMPLE / "bandit.yaml"),
        "run.max_iterations=10",
        "run.eval_interval=5",
    )
    out = run_train(tmp_path, bandit_env, *args)
    assert "last_eval_return: 0.8" in out, out[-3000:]  # found the best arm
    manifest = json.loads((tmp_path / "bandit" / "checkpoints" / "latest.json").read_text())
    assert manifest["step"] == 10 and manifest["state"]["env_steps"] == 10 * 64
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    history = client.get_metric_history(manifest["mlflow_run_id"], "eval/return_mean")
    assert [m.step for m in sorted(history, key=lambda m: m.step)] == [4, 9]

    # evaluate-latest goes through the category's evaluate_checkpoint
    evaluated = run_evaluate("bandit", tmp_path, bandit_env)
    assert '"eval/return_mean": 0.8' in evaluated


def test_a_model_of_an_unregistered_kind_fails_before_starting(tmp_path: Path, train_env) -> None:
    module = tmp_path / "lonely_category.py"
    module.write_text(
        "from rl_core.api import register_model\n"
        "def register():\n"
        "    register_model('lonely', lambda cfg, spaces: None, category='lonely', force=True)\n"
    )
    env = {**train_env, "RLPIPE_EXT_MODULE": "lonely_category", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "flows" / "train.py"), "model.model_type=lonely"]
        + [f"run.output_dir={tmp_path / 'out'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "has category 'lonely', which is not a registered kind of training" in proc.stderr
    assert "rl_core.kind.register_kind" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing started, nothing written
