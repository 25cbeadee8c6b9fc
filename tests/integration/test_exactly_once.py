"""Exactly-once iterations under injected faults: a representative part of the fault matrix
(a raised step, a killed worker; a killed driver is
``tests/integration/test_resume_and_recovery.py``).

Each case trains a short run with ``RLPIPE_FAULTS`` and compares its final checkpoint with
a fault-free run of the same seed, bit for bit (``benchmarks/chaos.py`` runs them all). Where
a preset meets several faults, they strike one run at successive iterations: each recovery
must also leave a state the next one recovers from.
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


def test_async_mode_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """Async mode: a failed rollout step forgets what it launched and puts the env and
    sampling state back; a killed worker is replayed from the checkpoint, which carries the
    batches collected ahead. (A hung step killed at its deadline is replayed the same way;
    deadlines themselves are ``tests/cluster/test_worker_deadlines.py``, and
    ``benchmarks/chaos.py`` runs every kind at every step.)"""
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=async_cartpole",
        "--cases=raise:rollout@1+kill:rollout@2+raise:update@3",
    )
    assert [r["fault"] for r in rows] == ["raise:rollout@1,kill:rollout@2,raise:update@3"]


def test_off_policy_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """SAC: a killed trainer at the step that fills the replay buffer is replayed from the
    checkpoint that holds the buffer; a failed update puts the sampling state back."""
    rows = run_matrix(
        tmp_path, train_env, "--presets=sac_pendulum", "--cases=kill:advantage@1+raise:update@2"
    )
    assert [r["fault"] for r in rows] == ["kill:advantage@1,raise:update@2"]


def test_reasoning_agent_faults_end_bit_identical(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    """The reasoning preset with multi-turn agent trajectories: a rollout worker killed
    mid-trajectory, and faults in the other steps."""
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=agent",
        "--cases=kill:rollout@1+raise:update@1+kill:reward@2+raise:weight_sync@3",
    )
    assert [r["fault"] for r in rows] == [
        "kill:rollout@1,raise:update@1,kill:reward@2,raise:weight_sync@3"
    ]


def test_manipulation_faults_end_bit_identical(tmp_path: Path, train_env: dict[str, str]) -> None:
    """ManiSkill3: a killed env worker is rebuilt with the simulators of the last checkpoint
    (each env's episode seed and actions, replayed, as LIBERO's envs are too) and the
    iterations since are replayed; a failed rollout puts the simulators back; a killed
    trainer and a failed update come back to the same weights. (Meta-World, whose MuJoCo
    state goes into checkpoints, passes the same cases in ``benchmarks/chaos.py
    --presets=metaworld``; its checkpoint restore is tested in tests/cluster.)"""
    rows = run_matrix(
        tmp_path,
        train_env,
        "--presets=maniskill",
        "--cases=raise:rollout@1+kill:update@1+kill:rollout@2+raise:update@3",
    )
    assert [(r["preset"], r["fault"]) for r in rows] == [
        ("maniskill", "raise:rollout@1,kill:update@1,kill:rollout@2,raise:update@3")
    ]
