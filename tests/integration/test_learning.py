"""Learning checks: the default preset solves CartPole; evaluate.py reads its checkpoint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, run_train

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_default_preset_solves_cartpole_and_evaluates(tmp_path: Path, train_env) -> None:
    started = time.monotonic()
    out = run_train(tmp_path, train_env, timeout=900)  # the default preset, no overrides
    wall = time.monotonic() - started
    assert re.search(r"solved: True", out), out[-4000:]
    last_eval = float(re.search(r"last_eval_return: ([0-9.]+)", out).group(1))
    assert last_eval >= 475.0
    print(f"default preset solved CartPole (eval {last_eval}) in {wall:.0f}s wall")

    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "flows" / "evaluate.py"),
            "--run-name",
            "ppo-cartpole",
            "--output-dir",
            str(tmp_path),
            "--episodes",
            "10",
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
