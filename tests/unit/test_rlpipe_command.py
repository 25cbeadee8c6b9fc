"""The ``rlpipe`` command: its subcommands, errors, and ``rlpipe runs`` on run folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flows import command, runs_cli
from infra.checkpoint.lease_holder import holder_record
from infra.checkpoint.lease_local import encode_record


def test_help_lists_every_command_and_unknown_ones_fail(capsys):
    assert command.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "evaluate", "convert", "runs", "stack"):
        assert f"  {name}" in out
    assert command.main([]) == 2  # no command: the usage, and a failing exit code
    assert command.main(["trian"]) == 2
    assert "unknown command 'trian'" in capsys.readouterr().err


def test_version_is_the_package_version_with_a_changelog_section(capsys):
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert command.main(["--version"]) == 0
    assert capsys.readouterr().out == f"rlpipe {declared}\n"
    assert f"\n## {declared} " in (root / "CHANGELOG.md").read_text()


@pytest.mark.parametrize("name", sorted(command.COMMANDS))
def test_each_command_answers_help_under_its_rlpipe_name(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        command.main([name, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: rlpipe {name}")


def test_the_console_script_is_installed():
    script = Path(sys.executable).parent / "rlpipe"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "rlpipe <command>" in out.stdout


def write_run(root: Path, name: str, iteration: int, max_iterations: int, **state) -> Path:
    store = root / name / "checkpoints"
    step = store / f"step_{iteration:06d}"
    step.mkdir(parents=True)
    config = {"run": {"name": name, "max_iterations": max_iterations}}
    (step / "config.json").write_text(json.dumps(config))
    manifest = {
        "dir": step.name,
        "step": iteration,
        "run_name": name,
        "state": {"iteration": iteration, "solved": False, **state},
    }
    (store / "latest.json").write_text(json.dumps(manifest))
    return store


def test_runs_lists_state_progress_and_checkpoint(tmp_path, capsys):
    write_run(tmp_path, "done", 5, 5)
    write_run(tmp_path, "solved-early", 3, 50, solved=True)
    write_run(tmp_path, "stopped", 2, 5)
    live = write_run(tmp_path, "live", 1, 5)
    (live / "lease.json").write_bytes(encode_record(holder_record("live", "id", 60.0)))
    dead = write_run(tmp_path, "dead-holder", 1, 5)
    gone = {**holder_record("dead-holder", "id", 60.0), "pid": 2**22 + 12345}  # no such pid
    (dead / "lease.json").write_bytes(encode_record(gone))
    (tmp_path / "broken" / "checkpoints").mkdir(parents=True)
    (tmp_path / "broken" / "checkpoints" / "latest.json").write_text("{not json")

    rows = {row.name: row for row in runs_cli.list_runs(tmp_path)}
    assert {name: row.state for name, row in rows.items()} == {
        "done": "finished",
        "solved-early": "finished",
        "stopped": "stopped",
        "live": "running",
        "dead-holder": "stopped",
    }
    assert rows["stopped"].checkpoint.endswith("stopped/checkpoints/step_000002")
    assert runs_cli.main(["--output-dir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["name"]: (r["iteration"], r["max_iterations"]) for r in listed}["stopped"] == (2, 5)
    assert runs_cli.main(["--output-dir", str(tmp_path / "missing")]) == 2
