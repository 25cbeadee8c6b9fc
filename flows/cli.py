"""Command line of ``flows/train.py``: arguments, local services, progress and summary.

Exit codes (docs/faq.md, "Exit codes"): :data:`EXIT_FINISHED`, :data:`EXIT_FAILED`,
:data:`EXIT_BAD_INPUT`, :data:`EXIT_STOPPED`, :data:`EXIT_TERMINATED`.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from flows.cli_args import (  # noqa: F401 - re-exported for the other CLIs
    TRAIN_DESCRIPTION,
    add_trust_checkpoint_flag,
    build_parser,
    cli_overrides,
    run_name_arg,
)
from flows.early_start import replay_early_logs
from flows.stop_signals import exit_code_of, install_stop_handlers, stop_signal
from flows.terminal import Terminal
from infra.checkpoint.lease import LeaseError
from infra.checkpoint.store import CheckpointError
from infra.cluster.placement import PlacementError
from infra.cluster.runtime_env import apply_base_env
from infra.cluster.worker_group import WorkerStartError
from infra.extensions import ExtensionError, load_extension_modules
from infra.ops.prefect_api import start_prefect_api, stop_prefect_api, wait_for_prefect_api
from infra.ops.stack_state import attach_running_stack
from infra.tracking.secrets import install_log_redaction, redact_text
from rl_core.config import ConfigError, RLPipeConfig, load_config
from rl_core.config.loader import DEFAULT_PRESET
from rl_core.data import DataFileError

console = Console(stderr=True)
logger = logging.getLogger("rlpipe.cli")

EXIT_FINISHED = 0  #: the run finished (or had nothing left to do)
EXIT_FAILED = 1  #: any other failure
EXIT_BAD_INPUT = 2  #: config, data, extension, placement, checkpoint refused, run held
EXIT_STOPPED = 130  #: stopped by Ctrl-C (SIGINT) or its budget, after a committed checkpoint
EXIT_TERMINATED = 143  #: stopped by SIGTERM after a committed checkpoint

#: Errors that mean bad input: the CLI prints one line and exits with EXIT_BAD_INPUT.
BAD_INPUT_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    ExtensionError,
    DataFileError,
    CheckpointError,
    LeaseError,
    PlacementError,
    WorkerStartError,
)


def run_cli(
    train_flow: Any,
    argv: list[str] | None = None,
    default_preset: str = DEFAULT_PRESET,
    prog: str = "python flows/train.py",
    description: str = TRAIN_DESCRIPTION,
    presets: list[str] | None = None,
) -> int:
    """Validate the config, make sure a Prefect API exists, run the flow.

    ``description`` and ``presets`` are what ``--help`` says the command does and which
    presets it lists (see :func:`~flows.cli_args.build_parser`).

    Returns:
        The exit code: 0 finished, 1 failed, 2 bad input, 130 stopped by Ctrl-C (SIGINT) or
        the run's budget, 143 stopped by SIGTERM.
    """
    # intermixed: overrides may come before and after options (`a.b=1 --config X c.d=2`)
    args = build_parser(default_preset, prog, description, presets).parse_intermixed_args(argv)
    apply_base_env()
    terminal = Terminal(console, verbose=args.verbose)
    replay_early_logs()
    install_log_redaction()
    overrides = cli_overrides(args)
    try:
        load_extension_modules()
        cfg = load_config(args.config, overrides)  # fail before any server or worker starts
        preflight(cfg)
    except BAD_INPUT_ERRORS as exc:  # nothing written yet (no log file either)
        terminal.close()
        print_error(exc)
        return EXIT_BAD_INPUT
    log_path = terminal.open_log(cfg.run.output_dir, cfg.run.name)
    logger.info("run %s: full log in %s", cfg.run.name, log_path)
    install_stop_handlers()
    attach_running_stack()  # a no-op if the early start attached (or started) already
    try:
        with prefect_api(Path(cfg.run.output_dir), cfg.cluster):
            summary = train_flow(preset=args.config, overrides=overrides)
            signum = stop_signal()
            if signum is not None and summary.get("prefect_flow_run_id"):
                mark_cancelled(summary["prefect_flow_run_id"], signum, summary.get("iterations"))
    except BAD_INPUT_ERRORS as exc:
        terminal.log_failure(exc)
        terminal.close()
        print_error(exc, log_path)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - its traceback goes to the log file
        terminal.log_failure(exc)
        terminal.close()
        print_error(exc, log_path)  # e.g. the rewind limit or diverged updates: checkpoint kept
        signum = stop_signal()  # e.g. a warm start stopped by Ctrl-C: the signal's code
        return EXIT_FAILED if signum is None else exit_code_of(signum)
    terminal.close()
    signum = stop_signal()
    stopped = summary.get("stopped") or ("request" if signum is not None else None)
    if stopped == "idle":  # e.g. an externally served online run: no feedback batch waiting
        _print_summary(summary, "rlpipe run trained what was waiting")
        console.print(
            f"nothing more to train after iteration {summary.get('iterations')} (no full "
            "batch of feedback waiting); the checkpoint is committed and the next start "
            "continues",
            soft_wrap=True,
        )
        return EXIT_FINISHED
    _print_summary(summary, "rlpipe run stopped" if stopped else "rlpipe run finished")
    if stopped:
        if stopped == "budget":
            why = "by its budget (run.budget_hours)"
        else:
            why = f"on request ({signal.Signals(signum or signal.SIGINT).name})"
        console.print(
            f"[yellow]stopped {why} after iteration {summary.get('iterations')}, whose "
            "checkpoint is committed; rerun the same command to continue[/yellow]",
            soft_wrap=True,
        )
        return EXIT_STOPPED if stopped == "budget" else exit_code_of(signum or signal.SIGINT)
    return EXIT_FINISHED


def mark_cancelled(flow_run_id: str, signum: int, iterations: Any) -> None:
    """Set the train flow run's final state to Cancelled (it stopped on a signal).

    The flow itself completed (its iteration finished and was checkpointed); Cancelled is
    what the Prefect UI should show for a run someone stopped. Best effort: a failure to
    reach the API is logged, the exit code is the same.
    """
    from prefect import get_client
    from prefect.states import Cancelled

    name = signal.Signals(signum).name
    message = f"stopped by {name} after iteration {iterations} (checkpoint committed)"
    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(flow_run_id, Cancelled(message=message), force=True)
    except Exception as exc:  # noqa: BLE001 - the run is stopped and checkpointed either way
        logger.warning("could not mark flow run %s Cancelled: %s", flow_run_id, exc)


def preflight(cfg: RLPipeConfig) -> None:
    """Run the input checks of ``cfg``'s model category (raises on bad input).

    A ``model.model_path`` hub id must be in the local Hugging Face cache (unless the run
    downloads it, or a warm start or ``run.init_from`` provides the model).
    """
    from infra.driver.runtimes import runtime_class
    from infra.hub_models import check_model_path

    pretrained = cfg.pretrained_model()
    if pretrained is not None and not (cfg.run.warm_start or cfg.run.init_from):
        check_model_path(pretrained)
    runtime_class(cfg).preflight(cfg)


def print_error(exc: BaseException, log_path: Path | None = None) -> None:
    """One unwrapped ``error: ...`` line, secrets masked (the text is not read as rich markup).

    Args:
        exc: The error.
        log_path: The run's log file (named at the end of the line when given).
    """
    text = escape(redact_text(str(exc) or type(exc).__name__))
    where = f" (full log: {escape(str(log_path))})" if log_path is not None else ""
    console.print(f"[red]error:[/red] {text}{where}", soft_wrap=True, highlight=False)


@contextmanager
def prefect_api(output_dir: Path, cluster: Any = None) -> Iterator[str]:
    """Use ``PREFECT_API_URL`` or a local server for the duration of the block.

    With ``cluster`` (the config's ``cluster`` section), Ray is connected while a local
    server starts: the two start-ups overlap instead of adding up. On exit, Ray is shut
    down first (its task workers flush their Prefect logs while the API is still up), then
    a server started here is stopped.
    """
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_CLIENT_CSRF_SUPPORT_ENABLED,
        temporary_settings,
    )

    from infra.cluster import ray_cluster

    server = start_prefect_api(output_dir / ".prefect")
    try:
        if cluster is not None:  # workers inherit the API's URL, exported above
            started = time.perf_counter()
            ray_cluster.connect_cluster(cluster)
            logger.debug("Ray connected in %.1fs", time.perf_counter() - started)
        if server:
            wait_for_prefect_api(server)
        settings: dict[Any, Any] = {PREFECT_API_URL: os.environ["PREFECT_API_URL"]}
        if server:
            settings[PREFECT_CLIENT_CSRF_SUPPORT_ENABLED] = False  # see CLIENT_SETTINGS
        with temporary_settings(settings):
            yield os.environ["PREFECT_API_URL"]
    finally:
        started = time.perf_counter()
        ray_cluster.shutdown()
        logger.debug("Ray shut down in %.1fs", time.perf_counter() - started)
        if server:
            _flush_prefect_logs()
            logger.debug("Prefect logs flushed after %.1fs", time.perf_counter() - started)
            stop_prefect_api(server)
            logger.debug("local Prefect API stopped after %.1fs", time.perf_counter() - started)


def _flush_prefect_logs() -> None:
    """Send buffered run logs and events, then stop queuing new ones for the API.

    Anything queued after the local API stops would be retried with back-off at exit
    (seen: a minute of "Error logging to API" before the process ends).
    """
    try:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogHandler, APILogWorker

        APILogWorker.drain_all(timeout=10)
        EventsWorker.drain_all(timeout=10)
        for logger_obj in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
            for handler in list(getattr(logger_obj, "handlers", [])):
                if isinstance(handler, APILogHandler):
                    logger_obj.removeHandler(handler)
    except Exception:  # noqa: BLE001 - best effort at shutdown
        logger.debug("could not flush Prefect logs", exc_info=True)


def _print_summary(summary: dict[str, Any], title: str) -> None:
    summary = {k: redact_text(v) if isinstance(v, str) else v for k, v in summary.items()}
    if summary.get("already_finished"):
        title = "rlpipe run had already finished: nothing trained"
    console.rule(title)
    if "report" in summary:  # a flow that is not a training run (e.g. demos) names its lines
        for key, value in summary["report"].items():
            console.print(f"{key:>18}: {value}")
        return
    for key in (
        "run_name",
        "iterations",
        "env_steps",
        "solved",
        "last_eval_return",
        "best_eval_return",
        "resumed_from",
        "cpu_hours",
    ):
        console.print(f"{key:>18}: {summary.get(key)}")
    if summary.get("initial_eval_return") is not None:
        console.print(f"{'eval before run':>18}: {summary['initial_eval_return']}")
    console.print(f"{'MLflow run id':>18}: {summary.get('mlflow_run_id')}")
    console.print(f"{'tracking URI':>18}: {summary.get('tracking_uri')}")
    console.print(f"{'checkpoint dir':>18}: {summary.get('checkpoint_dir')}")
    if summary.get("registered_model"):
        console.print(f"{'registered model':>18}: {summary['registered_model']}")
        if summary.get("registered_checkpoint"):
            console.print(f"{'registered from':>18}: the {summary['registered_checkpoint']}")
    if summary.get("model_dir"):
        console.print(f"{'model dir':>18}: {summary['model_dir']}")
