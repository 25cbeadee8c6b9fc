"""The train CLI's terminal: Prefect's per-run lines go to the run's log file, the screen
keeps rlpipe's messages and one progress display."""

from __future__ import annotations

import io
import logging
import os

import pytest
from rich.console import Console

from flows import terminal as terminal_module
from flows.terminal import (
    PROGRESS_FIELD,
    PROGRESS_LOGGER,
    WORKER_CONSOLE_LEVEL_VAR,
    ProgressDisplay,
    Terminal,
    log_file_path,
)
from tests.env_vars import unset


@pytest.fixture(autouse=True)
def no_worker_console_setting(monkeypatch):
    unset(monkeypatch, WORKER_CONSOLE_LEVEL_VAR)


def progress_record(iteration: int, total: int, text: str) -> dict:
    return {PROGRESS_FIELD: {"iteration": iteration, "total": total, "text": text}}


def emit_run_lines() -> None:
    logging.getLogger("prefect.task_runs").info("Finished in state Completed()")
    logging.getLogger("prefect.flow_runs").error("Encountered exception: Traceback ...")
    logging.getLogger("rlpipe.train").info("continuing run from iteration 2")
    logging.getLogger("rlpipe.train").warning("workers were rebuilt")
    logging.getLogger("some.library").info("chatty library line")
    logging.getLogger(PROGRESS_LOGGER).info(
        "iter 3/10 | env steps 3072", extra=progress_record(3, 10, "env steps 3072")
    )


def test_quiet_screen_and_full_log_file(tmp_path):
    screen = io.StringIO()
    terminal = Terminal(Console(file=screen, width=200), verbose=False)
    path = terminal.open_log(tmp_path, "my-run")
    try:
        emit_run_lines()
    finally:
        terminal.close()
    assert path == log_file_path(tmp_path, "my-run") == tmp_path / "my-run" / "rlpipe.log"
    shown, logged = screen.getvalue(), path.read_text()
    assert "Completed()" not in shown and "Encountered exception" not in shown
    assert "chatty library line" not in shown
    assert "continuing run from iteration 2" in shown and "workers were rebuilt" in shown
    assert "iter 3/10 | env steps 3072" in shown  # not a terminal: a plain progress line
    for line in ("Completed()", "Encountered exception", "continuing run", "rebuilt", "iter 3/10"):
        assert line in logged
    assert "chatty library line" not in logged  # other libraries: warnings and up


def test_verbose_shows_prefect_lines_on_screen(tmp_path):
    screen = io.StringIO()
    terminal = Terminal(Console(file=screen, width=200), verbose=True)
    terminal.open_log(tmp_path, "run")
    try:
        emit_run_lines()
    finally:
        terminal.close()
    assert "Completed()" in screen.getvalue() and "Encountered exception" in screen.getvalue()


def test_a_terminal_gets_one_live_bar_instead_of_lines(tmp_path):
    screen = io.StringIO()
    console = Console(file=screen, width=120, force_terminal=True)
    terminal = Terminal(console, verbose=False)
    assert terminal.live
    terminal.open_log(tmp_path, "run")
    try:
        for it in (1, 2):
            logging.getLogger(PROGRESS_LOGGER).info(
                "iter %d/4", it, extra=progress_record(it, 4, f"return {it}.0")
            )
    finally:
        terminal.close()
    shown = screen.getvalue()
    assert "2/4" in shown and "return 2.0" in shown
    assert "iter 1/4" not in shown  # the bar, not the log lines
    assert "iter 1/4" in (tmp_path / "run" / "rlpipe.log").read_text()


def test_progress_display_starts_at_the_resumed_iteration():
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    display = ProgressDisplay(console)
    record = logging.makeLogRecord(progress_record(7, 10, "x"))
    display.emit(record)
    (task,) = display.progress.tasks
    assert task.completed == 7 and task.total == 10
    display.close()


def test_workers_started_later_keep_prefect_lines_off_the_terminal(tmp_path):
    Terminal(Console(file=io.StringIO()), verbose=True).close()
    assert WORKER_CONSOLE_LEVEL_VAR not in os.environ  # -v: workers print them too
    Terminal(Console(file=io.StringIO()), verbose=False).close()
    assert os.environ[WORKER_CONSOLE_LEVEL_VAR] == "WARNING"  # inherited by Ray workers
    assert logging.getLogger("mlflow").level == logging.WARNING


def test_the_log_file_rolls_over_and_stays_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(terminal_module, "LOG_MAX_BYTES", 2000)
    terminal = Terminal(Console(file=io.StringIO(), width=200), verbose=False)
    path = terminal.open_log(tmp_path, "long-run")
    try:
        for i in range(400):  # about 40 kB of lines
            logging.getLogger("rlpipe.test").info("line %04d %s", i, "x" * 40)
    finally:
        terminal.close()
    files = sorted(p.name for p in path.parent.glob("rlpipe.log*"))
    assert files == ["rlpipe.log", "rlpipe.log.1", "rlpipe.log.2", "rlpipe.log.3"]
    assert sum(p.stat().st_size for p in path.parent.glob("rlpipe.log*")) <= 4 * 2000 + 200
    assert "line 0399" in path.read_text()  # the newest lines are in rlpipe.log
