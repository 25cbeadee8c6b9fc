"""The GPU tools' pure parts: what the bundle carries, what ``gpu_check.py --system`` reads
from ``nvidia-smi`` and the run log, how it compares checkpoints, the cards' peaks."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

from scripts.gpu_checks.system import max_iterations, on_device
from scripts.gpu_checks.system_probe import (
    NOT_REPORTED,
    parse_device_lines,
    parse_nvidia_smi,
    progress_values,
    worker_devices,
)
from scripts.gpu_checks.system_resume import compare

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundle_carries_the_closure_less_the_machine_and_its_image() -> None:
    reqs = _load(ROOT / "scripts" / "gpu_bundle" / "requirements.py")
    roots = [Requirement(r) for r in ("prefect>=3.8,<3.9", "transformers==5.23.0", "torch")]
    image = {"httpx", "transformers", "pydantic", "numpy"}
    lines, skipped = reqs.carried(roots, image, leave_out={"pendulum"})
    assert lines["prefect"].startswith("prefect==3.8.")
    assert lines["transformers"] == "transformers==5.23.0"  # pinned: replaces the image's
    assert "torch" in skipped["machine"] and "torch" not in lines
    assert {"httpx", "pydantic"} <= set(skipped["image"]) and "httpx" not in lines
    assert "h2" in lines  # prefect asks for httpx[http2]: the extra's packages are carried
    assert skipped["leave-out"] == ["pendulum"] and "pendulum" not in lines
    assert all("==" in line for line in lines.values())


def test_project_dependencies_are_read_from_pyproject() -> None:
    reqs = _load(ROOT / "scripts" / "gpu_bundle" / "requirements.py")
    names = {r.name for r in reqs.project_dependencies(ROOT / "pyproject.toml")}
    assert {"prefect", "ray", "mlflow", "transformers"} <= names and "ruff" not in names
    stale = reqs.stale_pins([Requirement("ray==0.0.1"), Requirement("not-installed-here==1")])
    assert len(stale) == 1 and stale[0].startswith("ray ")  # a .venv older than the pins


def test_nvidia_smi_rows() -> None:
    text = "pid, used_memory [MiB]\n1234, 1530 MiB\n99, 612 MiB\n[N/A], [N/A]\n"
    assert parse_nvidia_smi(text) == {1234: 1530.0, 99: 612.0}


def test_device_lines_of_the_run_log(tmp_path: Path) -> None:
    log = (
        "2026-11-27 13:26:26,556 INFO    infra.cluster.worker_group: device actor 0: cuda:0 (GPU ids "
        "[0] on node 1a2b3c4d, CUDA_VISIBLE_DEVICES=0, pid 1234)\n"
        "2026-11-27 13:26:26,557 INFO    infra.cluster.worker_group: device env 0: cpu (GPU ids [] on "
        "node 1a2b3c4d, CUDA_VISIBLE_DEVICES=None, pid 1235)\n"
        "placement env: 1 worker(s) on cpus 0,1\n"
    )
    devices = parse_device_lines(log)
    assert devices[0] == {
        "worker": "actor 0",
        "device": "cuda:0",
        "gpu_ids": [0],
        "node": "1a2b3c4d",
        "cuda_visible_devices": "0",
        "pid": 1234,
    }
    assert devices[1]["device"] == "cpu" and devices[1]["gpu_ids"] == []
    assert on_device(devices, "cuda") is True and on_device(devices, "cpu") is False
    (tmp_path / "rlpipe.log").write_text("iter 1/2 | env steps 128\n")
    assert worker_devices(tmp_path / "rlpipe.log") == NOT_REPORTED
    assert on_device(NOT_REPORTED, "cuda") is None
    assert worker_devices(tmp_path / "missing.log").startswith("not reported")


def test_the_last_max_iterations_override_wins() -> None:
    assert max_iterations(["run.max_iterations=2", "x=1", "run.max_iterations=3"]) == 3


def test_the_system_runs_place_their_workers_on_the_device_they_check(tmp_path: Path) -> None:
    from rl_core.config import load_config
    from scripts.gpu_checks.system import RUNS, run_overrides

    for run in RUNS.values():
        for device in ("cuda", "cpu"):
            if device == "cpu" and run.cpu_setup is not None:
                run.cpu_setup(tmp_path)  # what the dry run's overrides name
            cfg = load_config(run.preset, run_overrides(run, device, tmp_path, []))
            assert cfg.cluster.device == device


def test_checkpoint_comparison() -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "step": 5, "opt": torch.tensor([1, 2])}
    same = compare(a, {k: v.clone() if torch.is_tensor(v) else v for k, v in a.items()})
    assert same == {"bit_identical": True, "max_abs_diff": 0.0, "compared": 3, "differing": []}
    moved = compare(a, {**a, "w": torch.tensor([1.0, 2.5])})
    assert not moved["bit_identical"] and moved["max_abs_diff"] == pytest.approx(0.5)
    assert moved["differing"] == ["w"]
    missing = compare(a, {"w": a["w"]})
    assert missing["max_abs_diff"] is None and set(missing["differing"]) == {"step", "opt"}
    assert not math.isnan(compare({"x": 1.0}, {"x": 1.0})["max_abs_diff"])


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H200", 989.0),
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.0),
        ("Tesla T4", None),
    ],
)
def test_card_peaks(name: str, peak: float | None) -> None:
    model = _load(ROOT / "benchmarks" / "_step_model.py")
    assert model.peak_tflops(name) == peak


def test_progress_values_reads_one_figure_of_each_progress_line(tmp_path: Path) -> None:
    log = tmp_path / "rlpipe.log"
    log.write_text(
        "2026-11-29 15:21:42,086 INFO    rlpipe.progress: iter 1/60 | env steps 128 | "
        "94 tokens/s | reward 0.414 | orch 308 ms\n"
        "2026-11-29 15:21:43,000 INFO    rlpipe.progress: iter 2/60 | env steps 256 | "
        "eval 0.700 | orch 259 ms\n"
        "12:00:01 | INFO    | iter 3/60 | env steps 384 | reward -1.5 | orch 205 ms\n"
        "the reward 0.9 of something else\n"
    )
    assert progress_values(log, "reward") == [0.414, -1.5]
    assert progress_values(log, "eval") == [0.7]
    assert progress_values(tmp_path / "missing.log", "reward") == []
