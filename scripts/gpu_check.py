"""GPU checks of rlpipe: its CUDA code paths alone, or the whole system through its CLI.

Usage (on a machine with a GPU): ``python scripts/gpu_check.py [--checks a,b]``. Runs each
check (``fsdp_generation``, ``embodied_sampling``, ``megatron_cuda``, ``packing_cuda``) without Ray, Prefect or
MLflow, prints one JSON line per check with its figures, and exits 1 when a check failed or
raised; exits 0 without a GPU (nothing to check). ``--device cpu`` runs the same checks on
the CPU (a dry run of the script itself, not a GPU result).

``--system`` runs the real CLI instead (``python flows/train.py --config <preset> ...`` in
subprocesses, each with a time limit of ``--timeout`` seconds, one Prefect API for all):
``ppo_cartpole`` with its trainer on the GPU, ``grpo_arith`` trained by FSDP2 in bf16,
``grpo_arith_megatron`` at tensor parallel 1, ``resume_after_kill`` (a run SIGKILLed
after its first committed checkpoint and rerun, compared with an uninterrupted run), and the
agent presets ``agent_calc`` (multi-turn tool calls) and ``code_tests`` (rewards from unit
tests in the sandbox), each with its SFT warm start, and ``online_arith`` (served by Ray
Serve, trained from a simulated user's feedback); ``--runs grpo_gsm8k_qwen05b`` runs the
real-model preset for 4 iterations at its own sizes (Qwen2.5-0.5B-Instruct in the Hugging
Face cache and GSM8K in ``data/gsm8k`` first: docs/gpu.md; its CPU dry run uses the stand-in
of ``scripts/build_standin.py``); one
JSON line per run with the device each worker reported and each process's peak GPU memory
(``nvidia-smi``). ``--runs`` picks some, ``--set key=value`` adds overrides to every run,
``--device cpu`` is the CPU dry run (``cluster.device=cpu``, tiny sizes). Outputs and logs
go under ``--out`` (default ``outputs/gpu-system/<time>/``).

On a GPU machine whose python3 lacks Prefect, Ray and MLflow, build the bundle here, copy
the checkout with ``.gpu/`` there and run, from the project root there::

    bash scripts/gpu_bundle.sh                     # here: writes .gpu/
    source .gpu/activate.sh                        # there: unpacks it once (~20 s)
    python3 scripts/gpu_check.py --system          # there: the seven runs

Each run starts its own local Ray cluster; ``grpo_arith`` first trains its SFT warm start
(``sft_arith``), which ``grpo_arith_megatron`` then reuses. Where one command may only run a
few minutes, split the runs with ``--runs`` and the same ``--out``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

CHECKS = ("fsdp_generation", "embodied_sampling", "megatron_cuda", "packing_cuda")
SYSTEM_RUNS = (
    "ppo_cartpole",
    "grpo_arith",
    "grpo_arith_megatron",
    "resume_after_kill",
    "agent_calc",
    "code_tests",
    "online_arith",
)
#: ``--system`` runs that only ``--runs`` starts: they need downloads first.
OPTIONAL_SYSTEM_RUNS = ("grpo_gsm8k_qwen05b",)


def main(argv: list[str] | None = None) -> int:
    """Run the checks named by ``--checks`` and print their results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", default=",".join(CHECKS), help="comma-separated checks")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--system", action="store_true", help="run the CLI (see above)")
    parser.add_argument("--runs", default=",".join(SYSTEM_RUNS), help="--system: which runs")
    parser.add_argument("--timeout", type=float, default=600, help="--system: s per run")
    parser.add_argument("--out", help="--system: output folder")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], help="--system: key=value"
    )
    args = parser.parse_args(argv)
    if args.system:
        known = (*SYSTEM_RUNS, *OPTIONAL_SYSTEM_RUNS)
        unknown_runs = sorted(set(args.runs.split(",")) - set(known))
        if unknown_runs:
            parser.error(f"unknown runs {unknown_runs}; known: {', '.join(known)}")
        if args.device == "cuda" and not torch.cuda.is_available():
            print(json.dumps({"cuda": False}))
            return 0
        from scripts.gpu_checks.system import run_system

        return run_system(args)
    names = [name for name in args.checks.split(",") if name]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        parser.error(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"cuda": False}))
        return 0
    device = torch.device(args.device)
    name_of = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (dry run)"
    print(json.dumps({"device": name_of, "torch": torch.__version__}))
    failed = 0
    for name in names:
        started = time.perf_counter()
        try:
            result = importlib.import_module(f"scripts.gpu_checks.{name}").check(device)
        except Exception:  # report every check, whatever one of them raises
            result = {"ok": False, "error": traceback.format_exc(limit=8)}
        result["seconds"] = round(time.perf_counter() - started, 2)
        print(json.dumps({"check": name, **result}), flush=True)
        failed += not result["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
