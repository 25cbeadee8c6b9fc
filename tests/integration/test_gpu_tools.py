"""The GPU tools keep working on the CPU: ``gpu_check.py --system --device cpu`` (the dry run
of the whole-system runs, one of them here) and ``benchmarks/gpu_step.py --tiny``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, run_process

pytestmark = pytest.mark.integration


def test_system_dry_run_reports_the_run(tmp_path: Path, train_env: dict[str, str]) -> None:
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--system", "--device=cpu"]
    proc = run_process([*cmd, "--runs=ppo_cartpole", f"--out={tmp_path}"], train_env, 300)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = [line for line in lines if line.get("run") == "ppo_cartpole"]
    assert run["ok"] and run["exit_code"] == 0 and run["checkpoint_step"] == 2
    assert lines[0]["prefect_api"] == train_env["PREFECT_API_URL"]  # one API for all runs
    assert run["gpu_memory"].startswith("not sampled")
    devices = run["devices"]  # the workers' device lines of the run log
    assert isinstance(devices, list) and devices, devices
    assert {d["worker"] for d in devices} == {"env 0", "actor 0"}
    assert all(d["device"] == "cpu" for d in devices), devices
    assert run["on_device"] is True
    assert (tmp_path / "ppo-cartpole" / "rlpipe.log").exists()


def test_gpu_step_tiny_prints_both_sides(train_env: dict[str, str]) -> None:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_step.py"), "--tiny"]
    proc = run_process([*cmd, "--repeats=1", "--iterations=2"], train_env, 300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("update tokens/s"))
    assert row.rstrip().endswith("x"), row  # bare and flow figures and their ratio
    assert "train flow orchestration" in proc.stdout and "train flow failed" not in out
    # the trainer's passes at reasoning lengths, padded against packed
    ratio = next(line for line in proc.stdout.splitlines() if "packed / padded, update" in line)
    assert float(ratio.split(": ")[1].split("x")[0]) > 0, ratio
