"""Arguments of the train and SFT command lines (light: no Prefect, Ray or MLflow import).

:mod:`flows.early_start` parses them before the heavy imports to start the local services.
"""

from __future__ import annotations

import argparse

from rl_core.config import available_presets, check_run_name
from rl_core.config.loader import DEFAULT_PRESET

#: ``--help`` description of the train CLI.
TRAIN_DESCRIPTION = "Train a policy with rlpipe (Prefect flows over Ray workers, MLflow tracking)."
#: Presets named with this prefix are supervised warm starts (``rlpipe sft``).
SFT_PREFIX = "sft_"


def sft_presets() -> list[str]:
    """The shipped presets of supervised warm starts (``rlpipe sft``)."""
    return [name for name in available_presets() if name.startswith(SFT_PREFIX)]


def build_parser(
    default_preset: str = DEFAULT_PRESET,
    prog: str = "python flows/train.py",
    description: str = TRAIN_DESCRIPTION,
    presets: list[str] | None = None,
) -> argparse.ArgumentParser:
    """Arguments of the train CLI (and of the SFT and demos CLIs, which share them).

    Args:
        default_preset: ``--config``'s default.
        prog: The program name ``--help`` shows.
        description: What ``--help`` says the command does.
        presets: The presets ``--help`` lists (default: every shipped preset).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    listed = available_presets() if presets is None else presets
    parser.add_argument(
        "--config",
        default=default_preset,
        help=f"preset name or YAML path (presets: {', '.join(listed)})",
    )
    parser.add_argument(
        "--run-name", type=run_name_arg, help="run name (resume key); same as run.name=..."
    )
    parser.add_argument(
        "--resume", action="store_true", help="require an existing checkpoint (run.resume=must)"
    )
    parser.add_argument("--fresh", action="store_true", help="refuse to resume (run.resume=never)")
    add_trust_checkpoint_flag(parser, "run.trust_checkpoint=true")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every log line on screen (Prefect's per-task lines included); they always "
        "go to <run.output_dir>/<run.name>/rlpipe.log",
    )
    parser.add_argument(
        "overrides", nargs="*", help="dotted overrides, e.g. actor.lr=1e-3 env.num_envs=16"
    )
    return parser


def run_name_arg(value: str) -> str:
    """``argparse`` type of ``--run-name``: a valid run name (see ``run.name``)."""
    try:
        return check_run_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_trust_checkpoint_flag(parser: argparse.ArgumentParser, same_as: str = "") -> None:
    """Add ``--trust-checkpoint`` (load checkpoints not signed with this user's key)."""
    parser.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="load a checkpoint whose pickled parts are not signed with your key (another "
        "user's or machine's), with a warning; only for checkpoints you trust"
        + (f"; same as {same_as}" if same_as else ""),
    )


def cli_overrides(args: argparse.Namespace) -> list[str]:
    """The dotted overrides the parsed arguments stand for (flags become overrides)."""
    overrides = list(args.overrides)
    if args.run_name:
        overrides.append(f"run.name={args.run_name}")
    if args.resume:
        overrides.append("run.resume=must")
    if args.fresh:
        overrides.append("run.resume=never")
    if args.trust_checkpoint:
        overrides.append("run.trust_checkpoint=true")
    return overrides
