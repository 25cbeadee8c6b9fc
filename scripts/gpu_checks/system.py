"""``gpu_check.py --system``: the whole system (CLI, Prefect API, Ray workers, MLflow) on
the GPU, through the real command line.

Each run is ``python flows/train.py --config <preset> key=value ...`` in a subprocess with a
time limit, all reporting to one Prefect API started here (unless ``PREFECT_API_URL`` is
set), each writing under its own ``run.output_dir``. One JSON line per run: exit code,
seconds, the checkpoint it ended at, the device each worker reported in its log, and each
process's peak GPU memory from ``nvidia-smi`` sampled during the run. The resume run
(:mod:`scripts.gpu_checks.system_resume`) adds a kill and a comparison.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.gpu_checks.system_probe import (
    GpuMemorySampler,
    progress_values,
    run_command,
    tail,
    worker_devices,
)

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    """One run of the CLI.

    Attributes:
        name: The check's name (also the run's ``run.name``, with ``_`` as ``-``).
        preset: ``--config`` of the run.
        gpu: Overrides on the GPU (``cluster.device=cuda`` is added).
        cpu: Overrides of the CPU dry run: tiny sizes (``cluster.device=cpu`` is added).
        cpu_setup: Writes under the output folder what the CPU dry run's overrides name
            (None: nothing to write).
    """

    name: str
    preset: str
    gpu: tuple[str, ...]
    cpu: tuple[str, ...]
    cpu_setup: Callable[[Path], None] | None = None

    @property
    def run_name(self) -> str:
        """``run.name`` of the run."""
        return self.name.replace("_", "-")


_PPO_CPU = ("env.num_envs=4", "rollout.num_steps=32", "eval.num_episodes=2", "eval.num_envs=2")
#: The tiny model without its SFT warm start, small batches (the dry run's LM runs).
_LM_CPU = (
    "run.warm_start=null",
    "model.model_path={out}/tiny-lm",
    "model.tiny_init=true",
    "data.prompts_per_batch=4",
    "data.eval_size=8",
    "eval.before_training=false",
)


def build_standin(out: Path) -> None:
    """The Qwen2.5-0.5B-Instruct stand-in and GSM8K-format files under ``out/standin``."""
    from rl_core.models.standin import create_standin
    from scripts.build_standin import write_gsm8k

    root = out / "standin"
    if not (root / "model" / "config.json").is_file():
        create_standin(root / "model")
        write_gsm8k(root / "gsm8k", train=32, test=4)


#: The real-model preset on the CPU: its stand-in and generated GSM8K-format files.
_GSM8K_CPU = (
    "model.dtype=float32",
    "model.model_path={out}/standin/model",
    "data.train_files=[{out}/standin/gsm8k/main/train-00000-of-00001.parquet]",
    "data.eval_files=[{out}/standin/gsm8k/main/test-00000-of-00001.parquet]",
    "data.prompts_per_batch=2",
    "algorithm.group_size=4",
    "rollout.max_new_tokens=16",
)
RUNS = {
    run.name: run
    for run in (
        Run(
            "ppo_cartpole",
            "ppo_cartpole",
            ("run.max_iterations=6", "run.eval_interval=3", "run.checkpoint_interval=3"),
            ("run.max_iterations=2", "run.eval_interval=2", "run.checkpoint_interval=2", *_PPO_CPU),
        ),
        Run(  # FSDP2 (the preset's backend) over NCCL, bf16 weights
            "grpo_arith",
            "grpo_arith",
            ("model.dtype=bfloat16", "actor.backend=fsdp", "run.max_iterations=6")
            + ("run.eval_interval=3", "run.checkpoint_interval=3"),
            ("run.max_iterations=2", "run.eval_interval=0", "run.checkpoint_interval=2", *_LM_CPU),
        ),
        Run(  # one trainer rank (tensor parallel 1) holding the rollout engine
            "grpo_arith_megatron",
            "grpo_arith_megatron",
            ("actor.num_workers=1", "rollout.num_workers=1")
            + ("actor.megatron.tensor_model_parallel_size=1", "run.max_iterations=6")
            + ("run.eval_interval=3", "run.checkpoint_interval=3"),
            ("actor.num_workers=1", "rollout.num_workers=1")
            + ("actor.megatron.tensor_model_parallel_size=1", "run.max_iterations=2")
            + ("run.eval_interval=0", "run.checkpoint_interval=2", *_LM_CPU),
        ),
        Run(  # multi-turn tool use: SFT warm start (sft_agent_calc), then GRPO, the whole preset
            "agent_calc",
            "agent_calc",
            ("run.max_iterations=40", "run.eval_interval=10"),
            ("run.max_iterations=2", "run.eval_interval=0", "run.checkpoint_interval=2")
            + ("rollout.max_new_tokens=8", "agent.max_total_tokens=48", *_LM_CPU),
        ),
        Run(  # rewards from unit tests run in the sandbox; SFT warm start, then GRPO
            "code_tests",
            "code_tests",
            ("run.max_iterations=20", "run.eval_interval=10"),
            ("run.max_iterations=2", "run.eval_interval=0", "run.checkpoint_interval=2")
            + ("rollout.max_new_tokens=8", *_LM_CPU),
        ),
        Run(  # served by Ray Serve, trained on the GPU from a simulated user's verdicts
            "online_arith",
            "online_arith",
            ("run.max_iterations=20", "run.eval_interval=10", "run.checkpoint_interval=10"),
            ("run.max_iterations=2", "run.eval_interval=0", "run.checkpoint_interval=2")
            + ("online.batch_size=4", "rollout.max_new_tokens=4", *_LM_CPU),
        ),
        Run(  # the real model at the preset's sizes (model cached, data in data/gsm8k)
            "grpo_gsm8k_qwen05b",
            "grpo_gsm8k_qwen05b",
            ("run.max_iterations=4", "run.eval_interval=4", "run.checkpoint_interval=4"),
            ("run.max_iterations=2", "run.eval_interval=2", "run.checkpoint_interval=2")
            + _GSM8K_CPU,
            cpu_setup=build_standin,
        ),
        Run(  # SIGKILL after the first committed checkpoint, rerun, compare
            "resume_after_kill",
            "ppo_cartpole",
            ("run.max_iterations=8", "run.checkpoint_interval=2", "run.eval_interval=0"),
            ("run.max_iterations=6", "run.checkpoint_interval=2", "run.eval_interval=0", *_PPO_CPU),
        ),
    )
}


def run_overrides(run: Run, device: str, out: Path, extra: list[str]) -> list[str]:
    """Every override of ``run`` on ``device``, writing under ``out``."""
    sized = run.gpu if device == "cuda" else tuple(o.format(out=out) for o in run.cpu)
    return [
        f"cluster.device={device}",
        *sized,
        f"run.output_dir={out}",
        f"run.name={run.run_name}",
        "run.stop_at_eval_return=null",
        *extra,
    ]


def child_env(api_url: str | None) -> dict[str, str]:
    """The runs' environment: this one, one Prefect API, no attaching to another Ray."""
    skip = ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")  # local Ray, each run's own SQLite store
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env["PYTHONUNBUFFERED"] = "1"
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def train_command(preset: str, overrides: list[str]) -> list[str]:
    """The CLI command line of a run."""
    return [sys.executable, str(ROOT / "flows" / "train.py"), "--config", preset, *overrides]


def manifest(out: Path, run_name: str) -> dict[str, Any] | None:
    """The run's committed checkpoint manifest (None without one)."""
    path = out / run_name / "checkpoints" / "latest.json"
    return json.loads(path.read_text()) if path.exists() else None


def observe(
    cmd: list[str], env: dict[str, str], out: Path, run_name: str, timeout: float
) -> dict[str, Any]:
    """Run ``cmd`` (a run named ``run_name`` under ``out``) while sampling GPU memory."""
    (out / run_name).mkdir(parents=True, exist_ok=True)
    output = out / run_name / "cli-output.txt"
    with GpuMemorySampler() as sampler:
        result = run_command(cmd, env, ROOT, timeout, output)
    lingering = sorted(set(sampler.sample()) & set(sampler.peak_mib))
    devices = worker_devices(out / run_name / "rlpipe.log")
    pids = (
        {d["pid"]: d["worker"] for d in devices if "pid" in d} if isinstance(devices, list) else {}
    )
    result["devices"] = devices
    result["gpu_memory"] = sampler.result(pids)
    if lingering:
        result["gpu_processes_left_after_exit"] = lingering
    done = manifest(out, run_name)
    result["checkpoint_step"] = done["step"] if done else None
    result["state"] = {k: v for k, v in (done or {}).get("state", {}).items() if k != "history"}
    result["log"] = str(out / run_name / "rlpipe.log")
    result["rewards"] = progress_values(out / run_name / "rlpipe.log", "reward")
    if result["exit_code"] != 0:
        result["output_tail"] = tail(output)
    return result


def max_iterations(overrides: list[str]) -> int:
    """``run.max_iterations`` set by ``overrides`` (the last one wins)."""
    return int([o for o in overrides if o.startswith("run.max_iterations=")][-1].split("=")[1])


def on_device(devices: list[dict[str, Any]] | str, device: str) -> bool | None:
    """Whether every reporting trainer (``actor``) worker computed on ``device``; None when
    no worker reported."""
    if isinstance(devices, str):
        return None
    actors = [d for d in devices if d["worker"].startswith("actor ")]
    return bool(actors) and all(d["device"].split(":")[0] == device for d in actors)


def check_run(run: Run, device: str, out: Path, env: dict[str, str], args: Any) -> dict[str, Any]:
    """Run one check; returns its JSON line's content."""
    from rl_core.config import ConfigError, load_config

    overrides = run_overrides(run, device, out, args.overrides)
    if device == "cpu" and run.cpu_setup is not None:
        run.cpu_setup(out)
    try:
        load_config(run.preset, overrides)
    except ConfigError as exc:
        return {"ok": False, "error": str(exc)}
    head: dict[str, Any] = {"preset": run.preset, "overrides": overrides}
    if run.name == "resume_after_kill":
        from scripts.gpu_checks.system_resume import check_resume

        return {**head, **check_resume(run.preset, overrides, out, env, args.timeout)}
    cmd = train_command(run.preset, overrides)
    result = {**head, **observe(cmd, env, out, run.run_name, args.timeout)}
    result["on_device"] = on_device(result["devices"], device)
    result["ok"] = (
        result["exit_code"] == 0
        and result["checkpoint_step"] == max_iterations(overrides)
        and result["on_device"] is True
    )
    return result


def start_prefect(out: Path) -> tuple[Any, str | None]:
    """A Prefect API for every run (None when ``PREFECT_API_URL`` names one already)."""
    if os.environ.get("PREFECT_API_URL"):
        return None, os.environ["PREFECT_API_URL"]
    from infra.ops.prefect_api import LocalPrefectServer

    home = out / ".prefect"
    ui = os.environ.get("PREFECT_UI_ENABLED", "true")  # off where the UI is not carried
    server = LocalPrefectServer(
        home / "server.log", extra_env={"PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": ui}
    )
    server.wait_healthy(timeout=180)
    return server, server.url


def run_system(args: Any) -> int:
    """Run the selected runs; prints one JSON line each; 1 if any failed."""
    device = args.device
    out = Path(args.out or ROOT / "outputs" / "gpu-system" / time.strftime("%Y%m%d-%H%M%S"))
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    server, api_url = start_prefect(out)
    import torch

    head = {"system": device, "out": str(out), "prefect_api": api_url, "torch": torch.__version__}
    if device == "cuda":
        head["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(json.dumps(head), flush=True)
    failed = 0
    try:
        env = child_env(api_url)
        for name in args.runs.split(","):
            result = check_run(RUNS[name], device, out, env, args)
            print(json.dumps({"run": name, **result}), flush=True)
            failed += not result["ok"]
    finally:
        if server is not None:
            server.stop()
    print(json.dumps({"system_seconds": round(time.perf_counter() - started, 1)}), flush=True)
    return 1 if failed else 0
