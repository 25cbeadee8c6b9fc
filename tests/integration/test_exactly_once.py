"""Exactly-once iterations under injected faults: a representative part of the fault matrix
(a raised step, a killed worker, a hung worker, a killed driver; and a killed FSDP trainer).

Each case trains a short run with ``RLPIPE_FAULTS`` and compares its final checkpoint with
a fault-free run of the same seed, bit for bit (``benchmarks/chaos.py`` runs them all).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, run_process

pytestmark = pytest.mark.integration


def run_matrix(tmp_path: Path, env: dict[str, str], *args: str) -> list[dict]:
    rows_file = tmp_path / "rows.json"
    proc = run_process(
        [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), *args, "--no-warmup"]
        + ["--out", str(tmp_path)]
        + ["--json", str(rows_file)],
        env,
        timeout=1500,
    )
    output = proc.stdout + proc.stderr
    assert rows_file.exists(), output[-6000:]
    rows = json.loads(rows_file.read_text())
    bad = [r for r in rows if not (r["completed"] and r["identical"])]
    assert not bad and proc.returncode == 0, json.dumps(bad, indent=1) + output[-3000:]
    return rows


def test_embodied_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """A hung worker and a killed driver (raised and killed steps: the async, off-policy and
    reasoning cases below, and tests/integration/test_resume_and_recovery.py)."""
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=ppo_cartpole",
        "--cases=hang:advantage",
        "--steps=update",
        "--driver-kill",  # the driver killed at the update step, then relaunched
        "--hang-timeout=10",  # the hung advantage step (milliseconds of work) ends after 10 s
    )
    assert [r["fault"] for r in rows] == ["hang:advantage@1", "kill_driver:update@1"]


def test_async_mode_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """Async mode: a failed rollout step forgets what it launched and puts the env and
    sampling state back; a killed worker is replayed from the checkpoint, which carries the
    batches collected ahead."""
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=async_cartpole",
        "--cases=raise:rollout,kill:rollout,raise:update",
    )
    assert [r["fault"] for r in rows] == ["raise:rollout@1", "kill:rollout@1", "raise:update@1"]


def test_off_policy_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """SAC: a killed trainer at the step that fills the replay buffer is replayed from the
    checkpoint that holds the buffer; a failed update puts the sampling state back."""
    rows = run_matrix(
        tmp_path, train_env, "--presets=sac_pendulum", "--cases=kill:advantage,raise:update"
    )
    assert [r["fault"] for r in rows] == ["kill:advantage@1", "raise:update@1"]


def test_reasoning_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=reasoning",
        "--cases=raise:update,kill:reward,raise:weight_sync",
    )
    assert len(rows) == 3
