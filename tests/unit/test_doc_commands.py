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
from concurrent.futures import ThreadPoolExecutor
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


def _tool_help(program: Program) -> tuple[int, str]:
    tool, *path = program.name.split()
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.run(
        [str(BIN / tool), *path, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr


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
    wanted: dict[str, Program] = {}
    for _, program in PROGRAMS:
        if program.kind == "tool":
            wanted.setdefault(program.name, program)
    with ThreadPoolExecutor(max_workers=2) as pool:
        helps = dict(zip(wanted, pool.map(_tool_help, wanted.values()), strict=True))
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
