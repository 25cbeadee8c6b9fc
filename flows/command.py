"""The ``rlpipe`` command: one entry point for everything a user runs.

    rlpipe train [--config PRESET] [section.field=value ...]   # = python flows/train.py
    rlpipe sft [--config PRESET] [...]                         # = python flows/sft.py
    rlpipe evaluate --run-name NAME [--episodes N]             # = python flows/evaluate.py
    rlpipe convert --run-name NAME --out DIR                   # checkpoint -> model directory
    rlpipe promote [--model NAME] [--auto-approve]             # = python flows/promote.py
    rlpipe serve [--config PRESET] [--model URI]               # = python flows/serve.py
    rlpipe promote-served [--config PRESET] [--auto-approve]   # = python flows/promote_served.py
    rlpipe sweep --config PRESET --seeds 0-4 [--grid a.b=1,2]  # seeds x grid, shown together
    rlpipe runs [--output-dir outputs]                         # local runs and their state
    rlpipe stack [up|down|status|env]                          # = bash scripts/stack.sh

``rlpipe <command> --help`` shows a command's options; ``rlpipe --version`` the installed
version. Each command keeps its own exit codes (``docs/faq.md``, "Exit codes").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A subcommand: where its ``main(argv, prog)`` lives and one line of help.

    Attributes:
        target: ``module:function`` of its entry point.
        summary: One line for ``rlpipe --help``.
        early_start: Start the local Prefect API and Ray while the modules import (the
            training commands; see :mod:`flows.early_start`).
    """

    target: str
    summary: str
    early_start: bool = False

    def load(self) -> Callable[..., int]:
        """Import the command's entry point."""
        module, _, function = self.target.partition(":")
        return getattr(importlib.import_module(module), function)


#: The subcommands, by name (imported only when run, so ``rlpipe --help`` is instant).
COMMANDS: dict[str, Command] = {
    "train": Command("flows.train:main", "train a policy (the train flow)", early_start=True),
    "sft": Command(
        "flows.sft:main",
        "supervised warm start: a language model on answers, a control policy on demonstrations",
    ),
    "demos": Command(
        "flows.demos:main", "collect demonstrations with an env's scripted expert (a dataset)"
    ),
    "evaluate": Command("flows.evaluate:main", "evaluate a run's checkpoint on held-out episodes"),
    "convert": Command(
        "infra.checkpoint.convert:main", "turn a checkpoint into a standalone model directory"
    ),
    "promote": Command(
        "flows.promote:main", "move 'best' to the newest model version if it wins (gated)"
    ),
    "promote-served": Command(
        "flows.promote_served:main",
        "make an online run's A/B candidate the served main version if users prefer it",
    ),
    "serve": Command(
        "flows.serve:main", "serve an online run's policy (OpenAI-compatible, with feedback)"
    ),
    "sweep": Command(
        "flows.sweep:main", "one preset over several seeds (and a grid): curves and a table"
    ),
    "runs": Command("flows.runs_cli:main", "list local runs: state, last checkpoint, MLflow run"),
    "stack": Command("flows.stack_cli:main", "the local stack: Prefect + MLflow servers, a worker"),
}


def usage() -> str:
    """``rlpipe --help``: the commands and what they do."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return (
        "usage: rlpipe <command> [options]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n`rlpipe <command> --help` shows a command's options; `rlpipe --version` the "
        "installed version."
    )


def version() -> str:
    """The installed rlpipe's version (its package metadata; ``CHANGELOG.md`` per version)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("rlpipe")
    except PackageNotFoundError:  # a checkout run without installing it
        return "unknown (not installed: pip install -e .)"


def main(argv: list[str] | None = None) -> int:
    """Run ``rlpipe``; returns the exit code (2: no or unknown command)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in ("-V", "--version"):
        sys.stdout.write(f"rlpipe {version()}\n")
        return 0
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(usage() + "\n")
        return 0 if args else 2
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        sys.stderr.write(
            f"error: unknown command {name!r}; commands: {', '.join(COMMANDS)} (rlpipe --help)\n"
        )
        return 2
    if command.early_start and not {"-h", "--help"} & set(rest):
        from flows.early_start import start_services_early

        start_services_early(rest)
    return command.load()(rest, prog=f"rlpipe {name}")


if __name__ == "__main__":
    sys.exit(main())
