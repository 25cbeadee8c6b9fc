"""The train CLI's terminal: one live progress display, a log file per run, quiet Prefect.

Prefect logs a line per task run and per flow run state (7–9 per iteration); on screen the
CLI shows instead one progress display (iteration bar, ETA and the iteration's figures)
plus rlpipe's own messages, warnings and errors. Everything, Prefect's lines included,
goes to the run's log file, ``<run.output_dir>/<run.name>/rlpipe.log``; ``-v`` shows it
all on screen too. Ray workers' output comes through logging: a worker that dies leaves
its traceback and crash dump in the log file, not on screen
(:mod:`infra.cluster.worker_output`). When the terminal is not interactive (a pipe, a CI log) the display is
one plain progress line per iteration.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from flows import PROJECT_LOGGERS
from infra.cluster import worker_output
from infra.log_detail import DETAIL_FIELD

#: Logger of the per-iteration progress records (their ``rlpipe_progress`` attribute holds
#: ``iteration``, ``total`` and ``text``).
PROGRESS_LOGGER = "rlpipe.progress"
PROGRESS_FIELD = "rlpipe_progress"
#: Prefect's per-run loggers: the log file only, unless ``-v``.
PREFECT_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
#: Name of the run's log file in ``<run.output_dir>/<run.name>/``.
LOG_FILE = "rlpipe.log"
#: The run's log file rolls over at this size, keeping LOG_BACKUPS older files
#: (rlpipe.log.1, ...): a run of any length keeps at most 4 x 32 MiB of logs.
LOG_MAX_BYTES = 32 * 1024 * 1024
LOG_BACKUPS = 3


#: Prefect's console handler level in processes started from here (Ray workers running
#: Prefect tasks): their per-task lines still reach the Prefect UI, not the terminal.
WORKER_CONSOLE_LEVEL_VAR = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"


def quiet_worker_consoles(verbose: bool) -> None:
    """Keep Prefect's per-task lines of worker processes off the terminal (unless verbose).

    Call it before Ray starts: its workers inherit the variable. A value the user set wins.
    """
    if not verbose:
        os.environ.setdefault(WORKER_CONSOLE_LEVEL_VAR, "WARNING")


def log_file_path(output_dir: str | Path, run_name: str) -> Path:
    """Where a run's log file lives."""
    return Path(output_dir).resolve() / run_name / LOG_FILE


class ProgressDisplay(logging.Handler):
    """Turns progress records into a live rich progress bar (started at the first one)."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.progress = Progress(
            TextColumn("iter"),
            MofNCompleteColumn(),
            BarColumn(bar_width=24),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
        )
        self.task: Any = None

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102
        data = getattr(record, PROGRESS_FIELD, None)
        if data is None:
            return
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task(
                data["text"], total=data["total"], completed=data["iteration"] - 1
            )
        self.progress.update(self.task, completed=data["iteration"], description=data["text"])

    def close(self) -> None:  # noqa: D102
        if self.task is not None:
            self.progress.stop()
        super().close()


class ScreenFilter(logging.Filter):
    """What the screen shows.

    Prefect's per-run lines and rlpipe's detail records (:mod:`infra.log_detail`) only when
    verbose; progress lines only without a live display; rlpipe's own messages from INFO up,
    other loggers' from WARNING up.
    """

    def __init__(self, verbose: bool, live_progress: bool) -> None:
        super().__init__()
        self.verbose, self.live_progress = verbose, live_progress

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        if hasattr(record, PROGRESS_FIELD):
            return not self.live_progress
        if record.name.startswith(PREFECT_RUN_LOGGERS) or getattr(record, DETAIL_FIELD, False):
            return self.verbose
        if record.name.startswith(PROJECT_LOGGERS):  # at their loggers' level (INFO, -v DEBUG)
            return True
        return self.verbose or record.levelno >= logging.WARNING


def screen_handler(console: Console) -> logging.Handler:
    """Rich's handler on a terminal; elsewhere plain unwrapped lines (greppable logs)."""
    if console.is_terminal:
        return RichHandler(console=console, show_path=False, markup=False)
    handler = logging.StreamHandler(console.file)
    handler.setFormatter(
        logging.Formatter("%(asctime)s | %(levelname)-7s | %(message)s", datefmt="%H:%M:%S")
    )
    return handler


class Terminal:
    """The CLI's screen and log file; :meth:`open_log` once the run's folder is known.

    Args:
        console: Where the screen output goes.
        verbose: Show every log line on screen (Prefect's included).
    """

    def __init__(self, console: Console, verbose: bool = False) -> None:
        self.console, self.verbose = console, verbose
        self.live = console.is_terminal and not verbose
        self.log_path: Path | None = None
        self._file: logging.Handler | None = None
        self._display = ProgressDisplay(console) if self.live else None
        root = logging.getLogger()
        from prefect.logging.handlers import PrefectConsoleHandler

        for handler in list(root.handlers):  # Prefect's, put on the root at its import
            if isinstance(handler, PrefectConsoleHandler):
                root.removeHandler(handler)
        screen = screen_handler(console)
        screen.setLevel(logging.DEBUG if verbose else logging.INFO)
        screen.addFilter(ScreenFilter(verbose, self.live))
        root.addHandler(screen)
        root.setLevel(logging.WARNING)
        for name in PROJECT_LOGGERS:
            logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)
        for name in PREFECT_RUN_LOGGERS:  # they reach the root's handlers (file, screen)
            logging.getLogger(name).setLevel(logging.INFO)
        if not verbose:  # MLflow's own INFO lines (database set-up, system metrics)
            logging.getLogger("mlflow").setLevel(logging.WARNING)
        quiet_worker_consoles(verbose)
        worker_output.route_worker_output()  # a dead worker's dump: to the log file
        if self._display is not None:
            logging.getLogger(PROGRESS_LOGGER).addHandler(self._display)
        self._screen: logging.Handler | None = screen

    def open_log(self, output_dir: str | Path, run_name: str) -> Path:
        """Append everything logged from now on to the run's log file; returns its path.

        The file rolls over at :data:`LOG_MAX_BYTES` (``rlpipe.log.1`` ... ``.3`` keep the
        older lines), so a long run's logs stay bounded.
        """
        path = log_file_path(output_dir, run_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
        handler.setLevel(logging.DEBUG if self.verbose else logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        self._file, self.log_path = handler, path
        return path

    def log_failure(self, exc: BaseException) -> None:
        """Write ``exc`` with its traceback to the log file only (the screen gets one line)."""
        if self._file is None:
            return
        record = logging.getLogger("rlpipe.cli").makeRecord(
            "rlpipe.cli",
            logging.ERROR,
            __file__,
            0,
            "the run failed: %s",
            (exc,),
            (type(exc), exc, exc.__traceback__),
        )
        self._file.handle(record)

    def close(self) -> None:
        """Stop the live display and close the log file."""
        worker_output.restore()
        if self._display is not None:
            logging.getLogger(PROGRESS_LOGGER).removeHandler(self._display)
            self._display.close()
            self._display = None
        for handler in (self._file, self._screen):
            if handler is not None:
                logging.getLogger().removeHandler(handler)
                handler.close()
        self._file = self._screen = None
