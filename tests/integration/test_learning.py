"""``flows/evaluate.py`` reads a finished run's last checkpoint and reproduces the evaluation
that ended training. (That the default preset solves CartPole is a learning curve:
``benchmarks/cartpole_solve.py`` measures it, with the anchors beside it.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, run_train

pytestmark = pytest.mark.integration
EPISODES = 4


def test_evaluate_reproduces_the_final_evaluation_of_a_run(tmp_path: Path, train_env) -> None:
    small = ["run.max_iterations=3", "run.eval_interval=3", "env.num_envs=4"]
    small += ["rollout.num_steps=64", f"eval.num_episodes={EPISODES}"]
    out = run_train(tmp_path, train_env, *small)
    last_eval = float(re.search(r"last_eval_return: ([0-9.]+)", out).group(1))

    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "flows" / "evaluate.py"),
            "--run-name",
            "ppo-cartpole",
            "--output-dir",
            str(tmp_path),
            "--episodes",
            str(EPISODES),
        ],
        cwd=ROOT,
        env=train_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    manifest = json.loads((tmp_path / "ppo-cartpole" / "checkpoints" / "latest.json").read_text())
    assert summary["step"] == manifest["step"]
    # Same weights, same fixed evaluation seeds, deterministic actions: the same mean return
    # as the evaluation that stopped training.
    assert summary["eval/return_mean"] == pytest.approx(last_eval, abs=0.05), (
        proc.stdout + proc.stderr[-3000:]
    )
    assert summary["mlflow_run_id"]
