"""GPU checks of rlpipe's CUDA code paths, without Ray, Prefect or MLflow.

Usage (on a machine with a GPU): ``python scripts/gpu_check.py [--checks a,b]``. Runs each
check (``fsdp_generation``, ``embodied_sampling``, ``megatron_cuda``), prints one JSON line
per check with its figures, and exits 1 when a check failed or raised; exits 0 without a GPU
(nothing to check). ``--device cpu`` runs the same checks on the CPU (a dry run of the
script itself, not a GPU result).
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

CHECKS = ("fsdp_generation", "embodied_sampling", "megatron_cuda")


def main(argv: list[str] | None = None) -> int:
    """Run the checks named by ``--checks`` and print their results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", default=",".join(CHECKS), help="comma-separated checks")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args(argv)
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
