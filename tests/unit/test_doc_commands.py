"""Every command of the README's and the docs' shell blocks exists, with the options it is
given: the ``rlpipe`` entry points (``python flows/*.py``, ``rlpipe ...``) by their
``--help`` in this process, the installed tools (Prefect, MLflow, Ray, ``hf``) by ``--help``
in a subprocess, the checkout's scripts by their ``add_argument`` calls; every ``--config``
names a preset."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.command import COMMANDS
from flows.command import main as rlpipe_main
from rl_core.config.loader import available_presets
from tests.doc_commands import (
    ROOT,
    DocCommand,
    Program,
    argparse_options,
    block_commands,
    doc_files,
    flags,
    option_value,
    program_of,
    shell_commands,
)

BIN = Path(sys.executable).parent


def _programs() -> list[tuple[DocCommand, Program]]:
    found = []
    for path in doc_files():
        for command in shell_commands(path):
            program = program_of(command)
            if program is not None:
                found.append((command, program))
    return found


PROGRAMS = _programs()


def _rlpipe_help(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = rlpipe_main([name, "--help"])
        except SystemExit as exit_:
            code = exit_.code
    assert code in (0, None), f"rlpipe {name} --help exited {code}:\n{out.getvalue()}"
    return out.getvalue()


#: Runs a console script's ``--help`` for each subcommand path given as JSON on stdin, in one
#: process (one import of the tool instead of one per subcommand); prints each path's exit
#: code and output between markers.
_HELPS = """
import contextlib, io, json, runpy, sys
script, paths = sys.argv[1], json.load(sys.stdin)
for path in paths:
    out = io.StringIO()
    sys.argv = [script, *path, "--help"]
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except Exception as exc:
            code, _ = 1, print(repr(exc), file=out)
    sys.__stdout__.write(json.dumps([code, out.getvalue()]) + "\\n")
"""


def _tool_helps(tool: str, paths: list[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[int, str]]:
    """``--help`` of each subcommand path of ``tool``, all in one subprocess."""
    import json

    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _HELPS, str(BIN / tool)],
        input=json.dumps(paths),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(answers) == len(paths), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {path: (code, text) for path, (code, text) in zip(paths, answers, strict=True)}


def test_the_docs_have_commands_of_every_kind() -> None:
    kinds = {program.kind for _, program in PROGRAMS}
    assert kinds == {"rlpipe", "script", "tool"}
    assert len(PROGRAMS) > 100  # (a parser that found nothing would pass the rest)


def test_rlpipe_commands_and_their_options_exist() -> None:
    helps: dict[str, str] = {}
    problems = []
    presets = set(available_presets())
    for command, program in PROGRAMS:
        if program.kind != "rlpipe":
            continue
        if program.name not in COMMANDS:
            problems.append(f"{command.source}: {command.text!r}: no command {program.name!r}")
            continue
        if program.name not in helps:
            helps[program.name] = _rlpipe_help(program.name)
        words = flags(program.args)
        if program.name == "stack":  # its subcommand (up, down, status, env)
            words += [w for w in program.args if not w.startswith("-")]
        for word in words:
            if word not in helps[program.name]:
                problems.append(f"{command.source}: {command.text!r}: no option {word}")
        config = option_value(program.args, "--config")
        if config and config not in presets and not config.endswith((".yaml", ".yml")):
            problems.append(f"{command.source}: {command.text!r}: no preset {config!r}")
    assert not problems, "\n".join(problems)
    assert {"train", "sft", "evaluate", "sweep", "convert"} <= set(helps)


def test_scripts_and_their_options_exist() -> None:
    """A script's options are read from its ``add_argument`` calls: a ``--help`` would
    import what the script imports (up to 6 s each)."""
    problems = []
    checked = set()
    for command, program in PROGRAMS:
        if program.kind != "script":
            continue
        script = ROOT / program.name
        if not script.is_file():
            problems.append(f"{command.source}: {command.text!r}: no file {program.name}")
            continue
        checked.add(program.name)
        if script.suffix == ".sh":
            if program.args:
                problems.append(f"{command.source}: {command.text!r}: takes no arguments")
            continue
        options = argparse_options(script)
        problems += [
            f"{command.source}: {command.text!r}: no option {flag}"
            for flag in flags(program.args)
            if flag not in options
        ]
    assert not problems, "\n".join(problems)
    assert {"benchmarks/chaos.py", "scripts/gpu_check.py", "scripts/test.sh"} <= checked


def test_tools_and_their_options_exist() -> None:
    """Prefect's, MLflow's, Ray's and ``hf``'s subcommands, by their ``--help``."""
    paths: dict[str, set[tuple[str, ...]]] = {}
    for _, program in PROGRAMS:
        if program.kind == "tool":
            tool, *path = program.name.split()
            paths.setdefault(tool, set()).add(tuple(path))
    helps: dict[str, tuple[int, str]] = {}
    for tool, tool_paths in paths.items():
        for path, answer in _tool_helps(tool, sorted(tool_paths)).items():
            helps[" ".join([tool, *path])] = answer
    problems = []
    for command, program in PROGRAMS:
        if program.kind != "tool":
            continue
        code, text = helps[program.name]
        if code != 0:
            problems.append(f"{command.source}: {program.name} --help exited {code}: {text[-300:]}")
            continue
        problems += [
            f"{command.source}: {command.text!r}: no option {flag}"
            for flag in flags(program.args)
            if flag not in text
        ]
    assert not problems, "\n".join(problems)
    assert {"prefect deploy", "mlflow ui", "ray start"} <= set(helps)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "RLPIPE_FAULTS=kill:update@3 .venv/bin/python flows/train.py --fresh",
            ("rlpipe", "train"),
        ),
        ("python -m infra.checkpoint.convert --run-name r --out m", ("rlpipe", "convert")),
        (
            "cd /tmp/x && /p/.venv/bin/python benchmarks/overhead.py",
            ("script", "benchmarks/overhead.py"),
        ),
        ("RLPIPE_ROOT=$PWD .venv/bin/prefect --no-prompt deploy --all", ("tool", "prefect deploy")),
        (
            "prefect work-pool create rlpipe-process --type process",
            ("tool", "prefect work-pool create"),
        ),
        ("mlflow models serve -m 'models:/m@best' -p 5001", ("tool", "mlflow models serve")),
    ],
)
def test_a_command_line_names_its_program(text: str, expected: tuple[str, str]) -> None:
    *_, last = block_commands(text + "  # a comment\n", "t.md")
    program = program_of(last)
    assert program is not None and (program.kind, program.name) == expected
