"""The shell commands of the README's and the docs' ``bash`` blocks, split into what runs.

A block's lines are joined at ``\\`` continuations, comments dropped, and each line split at
``&&``, ``||``, ``;`` and ``|`` into commands; leading ``VAR=value`` assignments are left
out. :func:`program_of` names what a command runs: an rlpipe entry point (``python
flows/train.py``, ``rlpipe sweep``, ``python -m infra.checkpoint.convert``), a script of
the checkout (``benchmarks/*.py``, ``scripts/*.py`` and ``scripts/*.sh``; ``bash
scripts/stack.sh`` is ``rlpipe stack``) or a tool installed
with the project (``prefect``, ``mlflow``, ``ray``, ``hf``) with its subcommand path.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGS = ("bash", "sh", "shell", "console")
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_SPLIT = re.compile(r"\s(?:&&|\|\||;|\|)\s|\s&\s*$|\s&$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: ``python flows/<file>`` and ``python -m <module>``: the ``rlpipe`` command they are.
RLPIPE_SCRIPTS = {
    "flows/train.py": "train",
    "flows/sft.py": "sft",
    "flows/evaluate.py": "evaluate",
    "flows/demos.py": "demos",
    "flows/promote.py": "promote",
    "flows/promote_served.py": "promote-served",
    "flows/serve.py": "serve",
    "flows/sweep.py": "sweep",
    "infra.checkpoint.convert": "convert",
}
#: Tools installed with the project, checked with ``<tool> <subcommands> --help``, and
#: their command groups used in the docs (the word after a group is a subcommand).
TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "prefect": (
        "",
        "deployment",
        "deployment schedule",
        "server",
        "server database",
        "work-pool",
        "worker",
    ),
    "mlflow": ("", "runs", "models"),
    "ray": ("",),
    "hf": ("",),
}


@dataclass(frozen=True)
class DocCommand:
    """One command of a docs block: where it is, its words and what it runs."""

    source: str
    text: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class Program:
    """What a command runs.

    Attributes:
        kind: ``rlpipe`` (an ``rlpipe`` subcommand), ``script`` (a file of the checkout) or
            ``tool`` (an installed command line tool).
        name: The subcommand, the script's path, or the tool and its subcommands.
        args: The words after it.
    """

    kind: str
    name: str
    args: tuple[str, ...]


def doc_files() -> list[Path]:
    """The README and every page of ``docs/``."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_commands(path: Path) -> list[DocCommand]:
    """The commands of ``path``'s shell blocks."""
    commands = []
    for block in _BLOCK.finditer(path.read_text()):
        if block.group(1) in SHELL_LANGS:
            commands += block_commands(block.group(2), path.name)
    return commands


def block_commands(text: str, source: str) -> list[DocCommand]:
    """The commands of one shell block's ``text``."""
    commands = []
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        for part in _SPLIT.split(f" {line} "):
            part = part.strip().removeprefix("$ ")
            try:
                words = shlex.split(part)
            except ValueError:
                continue  # a quoted line folded over several lines (a JSON body)
            while words and _ASSIGN.match(words[0]):
                words = words[1:]
            if words:
                commands.append(DocCommand(source, part, tuple(words)))
    return commands


def _script_path(word: str) -> str | None:
    """The checkout-relative path of a script named by ``word`` (any folder prefix)."""
    match = re.search(r"(?:^|/)((?:benchmarks|scripts|flows)/[\w.-]+\.(?:py|sh))$", word)
    return match.group(1) if match else None


def program_of(command: DocCommand) -> Program | None:
    """What ``command`` runs, or None for other programs (``git``, ``pip``, ``curl``...)."""
    words = list(command.words)
    head = words[0].rsplit("/", 1)[-1]
    if head in ("python", "python3") and len(words) > 1:
        if words[1] == "-m" and len(words) > 2:
            sub = RLPIPE_SCRIPTS.get(words[2])
            return Program("rlpipe", sub, tuple(words[3:])) if sub else None
        script = _script_path(words[1])
        if script is None:
            return None
        if script in RLPIPE_SCRIPTS:
            return Program("rlpipe", RLPIPE_SCRIPTS[script], tuple(words[2:]))
        return Program("script", script, tuple(words[2:]))
    if head == "bash" and len(words) > 1 and (script := _script_path(words[1])):
        if script == "scripts/stack.sh":  # = rlpipe stack
            return Program("rlpipe", "stack", tuple(words[2:]))
        return Program("script", script, tuple(words[2:]))
    if head == "rlpipe":
        return Program("rlpipe", words[1] if len(words) > 1 else "", tuple(words[2:]))
    if head in TOOL_GROUPS:
        path, rest = [], words[1:]
        while rest and " ".join(path) in TOOL_GROUPS[head]:
            if rest[0].startswith("-"):
                if path:  # flags after the subcommand: its own
                    break
                rest = rest[1:]  # a global flag (``prefect --no-prompt deploy``)
                continue
            path.append(rest.pop(0))
        return Program("tool", " ".join([head, *path]), tuple(rest))
    return None


def flags(args: tuple[str, ...]) -> list[str]:
    """The option names among ``args`` (``--name`` of ``--name=value`` too, ``-v``)."""
    found = []
    for word in args:
        name = word.split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-zA-Z]", name):
            found.append(name)
    return found


def option_value(args: tuple[str, ...], option: str) -> str | None:
    """The value given to ``option`` (``--config X`` or ``--config=X``)."""
    for k, word in enumerate(args):
        if word == option and k + 1 < len(args):
            return args[k + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


def argparse_options(script: Path) -> set[str]:
    """The option strings a script's ``add_argument`` calls declare (read, not run)."""
    import ast

    options = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            options |= {
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("-")
            }
    return options
