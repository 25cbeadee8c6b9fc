"""Convert a training checkpoint into a standalone model directory.

Usage::

    python -m infra.checkpoint.convert --run-name ppo-cartpole --out models/cartpole
    python -m infra.checkpoint.convert --checkpoint outputs/ppo-cartpole/checkpoints/step_000010 --out models/cartpole-10
    python -m infra.checkpoint.convert --checkpoint s3://bucket/ckpts/ppo-cartpole --out models/cartpole

Modules named by ``RLPIPE_EXT_MODULE`` are imported first, so custom model types convert.
Load the result with ``infra.checkpoint.export.load_exported_policy(path)``; a Hugging Face
policy's directory also loads with ``AutoModelForCausalLM.from_pretrained(path)``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.markup import escape

from infra.checkpoint.export import ExportError, export_policy, policy_from_checkpoint
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.reader import locate_checkpoint
from infra.checkpoint.store import CheckpointError
from infra.cluster.runtime_env import apply_base_env
from infra.extensions import ExtensionError, load_extension_modules
from rl_core.config import ConfigError, check_run_name
from rl_core.registry import RegistryError

console = Console(stderr=True, soft_wrap=True, highlight=False)


def build_parser(prog: str = "python -m infra.checkpoint.convert") -> argparse.ArgumentParser:
    """Arguments of the converter."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Turn a training checkpoint into a standalone model directory.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-name", type=_run_name, help="training run whose checkpoints to read")
    where.add_argument(
        "--checkpoint",
        help="a checkpoint store (holds latest.json; a path or s3://...) or one step_* folder",
    )
    parser.add_argument("--output-dir", default="outputs", help="output dir of the run")
    parser.add_argument(
        "--checkpoint-uri", default=None, help="the run's run.checkpoint_uri, if it set one"
    )
    parser.add_argument("--step", type=int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    parser.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="trust the checkpoint's source: its config may ask for the model's own code "
        "(model.trust_remote_code)",
    )
    return parser


def _run_name(value: str) -> str:
    try:
        return check_run_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None, prog: str = "python -m infra.checkpoint.convert") -> int:
    """CLI entry point; returns the exit code (2 for bad input)."""
    args = build_parser(prog).parse_args(argv)
    apply_base_env()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        path = args.checkpoint or run_store_uri(args.output_dir, args.run_name, args.checkpoint_uri)
        load_extension_modules()
        ref = locate_checkpoint(path, args.step, args.trust_checkpoint)
        policy, config, spaces = policy_from_checkpoint(ref)
        out = export_policy(
            policy,
            config["model"],
            spaces,
            args.out,
            source={
                "run_name": config["run"]["name"],
                "step": ref.step,
                "checkpoint": ref.location,
                "mlflow_run_id": ref.manifest.get("mlflow_run_id"),
            },
            overwrite=args.overwrite,
        )
    except (CheckpointError, ConfigError, ExportError, ExtensionError, RegistryError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    files = ", ".join(sorted(p.name for p in out.iterdir()))
    console.print(
        f"wrote {config['model']['model_type']} policy (step {ref.step}) to {out}: {files}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
