"""The resume run of ``gpu_check.py --system``: a run SIGKILLed (with everything it started)
after its first committed checkpoint and rerun with the same command ends where an
uninterrupted run of the same config ends: final checkpoints (weights, optimizer and trainer
state, rollout RNGs) and final MLflow metrics compared, bit for bit or by the largest
difference."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from scripts.gpu_checks.system import ROOT, manifest, observe, train_command
from scripts.gpu_checks.system_probe import GpuMemorySampler, kill_session, worker_devices

#: Metrics that measure time or cost, not learning: left out of the comparison.
TIMING_PREFIXES = ("time/", "cost/", "system/")
TIMING_WORDS = ("second", "per_s", "throughput", "seconds")
#: Checkpoint entries not compared: the pickled vector envs of ``workers.pt`` and their
#: signatures (equal envs need not pickle to equal bytes; their observations, returns,
#: lengths and the rollout RNGs beside them are compared).
NOT_COMPARED = (".envs.__bytes__", ".signature.")


def _flatten(value: Any, name: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{name}.{key}", out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten(item, f"{name}[{i}]", out)
    elif not isinstance(value, (bytes, bytearray)):  # pickled envs: bytes differ, not state
        out[name] = value


def checkpoint_entries(folder: Path) -> dict[str, Any]:
    """Tensors and values of a checkpoint folder, by ``file:key`` (config files and
    :data:`NOT_COMPARED` left out)."""
    from safetensors.torch import load_file

    out: dict[str, Any] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".safetensors":
            for key, tensor in load_file(path).items():
                out[f"{rel}:{key}"] = tensor
        elif path.suffix == ".pt":
            _flatten(torch.load(path, weights_only=True, map_location="cpu"), rel, out)
        elif path.suffix == ".distcp":
            out[rel] = path.read_bytes()
    return {k: v for k, v in out.items() if not any(part in k for part in NOT_COMPARED)}


def difference(a: Any, b: Any) -> float:
    """0.0 when equal (tensors bit for bit), else the largest absolute difference (inf when
    not comparable)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if torch.equal(a, b):
            return 0.0
        if not (a.is_floating_point() or a.is_complex()):
            return float((a.long() - b.long()).abs().max())
        return float((a.double() - b.double()).abs().nan_to_num(math.inf).max())
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return 0.0 if a == b else abs(float(a) - float(b))
    return 0.0 if a == b else math.inf


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``bit_identical``, ``max_abs_diff``, entries compared and the first that differ."""
    diffs = {k: (difference(a[k], b[k]) if k in a and k in b else math.inf) for k in a | b}
    differing = sorted((k for k, d in diffs.items() if d != 0.0), key=lambda k: -diffs[k])
    worst = max(diffs.values(), default=0.0)
    return {
        "bit_identical": not differing,
        "max_abs_diff": None if math.isinf(worst) else worst,
        "compared": len(diffs),
        "differing": differing[:8],
    }


def final_metrics(out: Path, run_id: str) -> dict[str, float]:
    """Last value of each learning metric of an MLflow run (timing and cost left out)."""
    from mlflow.tracking import MlflowClient

    metrics = MlflowClient(f"sqlite:///{out / 'mlflow.db'}").get_run(run_id).data.metrics
    return {
        k: v
        for k, v in metrics.items()
        if not k.startswith(TIMING_PREFIXES) and not any(w in k for w in TIMING_WORDS)
    }


def kill_after_first_checkpoint(
    cmd: list[str], env: dict[str, str], out: Path, run_name: str, timeout: float
) -> dict[str, Any]:
    """Start ``cmd``; SIGKILL its session once ``latest.json`` names a checkpoint."""
    (out / run_name).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with (
        open(out / run_name / "cli-output-killed.txt", "wb") as log,
        GpuMemorySampler() as sampler,
    ):
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        first = None
        while time.perf_counter() - started < timeout and proc.poll() is None:
            first = manifest(out, run_name)
            if first:
                break
            time.sleep(0.1)
        exited = proc.poll()
        kill_session(proc)
    devices = worker_devices(out / run_name / "rlpipe.log")
    pids = (
        {d["pid"]: d["worker"] for d in devices if "pid" in d} if isinstance(devices, list) else {}
    )
    return {
        "killed_at_step": first["step"] if first and exited is None else None,
        "exit_code_before_kill": exited,
        "seconds": round(time.perf_counter() - started, 1),
        "gpu_memory": sampler.result(pids),
    }


def check_resume(
    preset: str, overrides: list[str], out: Path, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    """Reference run, killed run, its rerun; returns the comparison (``ok`` when the kill
    happened, the rerun resumed and finished)."""
    base = [o for o in overrides if not o.startswith("run.name=")]
    ref_cmd = train_command(preset, [*base, "run.name=resume-reference"])
    cmd = train_command(preset, [*base, "run.name=resume-killed"])
    reference = observe(ref_cmd, env, out, "resume-reference", timeout)
    killed = kill_after_first_checkpoint(cmd, env, out, "resume-killed", timeout)
    resumed = observe(cmd, env, out, "resume-killed", timeout)
    text = (out / "resume-killed" / "cli-output.txt").read_text(errors="replace")
    resumed_from = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if "resumed_from:" in line),
        None,
    )
    result: dict[str, Any] = {
        "reference": reference,
        "killed": killed,
        "resumed": resumed,
        "resumed_from": resumed_from,
    }
    ref_done, res_done = manifest(out, "resume-reference"), manifest(out, "resume-killed")
    if not (ref_done and res_done) or ref_done["step"] != res_done["step"]:
        return {**result, "ok": False, "error": "the two runs did not end at the same step"}
    ckpt = "checkpoints/" + ref_done["dir"]
    weights = compare(
        checkpoint_entries(out / "resume-reference" / ckpt),
        checkpoint_entries(out / "resume-killed" / ckpt),
    )
    metrics = compare(
        final_metrics(out, ref_done["mlflow_run_id"]), final_metrics(out, res_done["mlflow_run_id"])
    )
    result.update(final_step=ref_done["step"], checkpoint=weights, metrics=metrics)
    result["ok"] = (
        reference["exit_code"] == 0
        and resumed["exit_code"] == 0
        and killed["killed_at_step"] is not None
        and resumed_from not in (None, "None")
    )
    return result
