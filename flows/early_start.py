"""Start the local Prefect API and Ray before the train CLI imports Prefect, MLflow and torch.

Importing the flows takes seconds (Prefect, MLflow, torch), and so do starting a local
Prefect server and a local Ray cluster; done one after the other they add up. When
``python flows/train.py`` runs, :func:`start_services_early` reads the command line and the
preset with light imports only, starts the server (a subprocess), validates the config and
connects Ray, and the imports then run while the server boots. The CLI later finds both running and uses them:
:func:`infra.ops.prefect_api.start_prefect_api` returns the server started here, and
:func:`infra.cluster.ray_cluster.connect` is a no-op once connected.

Nothing starts for a command line or a preset that fails to parse, and a local server
started for a config that then fails validation is stopped at once: the CLI then reports
the error as usual, before any worker starts. With extension modules
(``RLPIPE_EXT_MODULE``) the services start in the usual order, after the imports: the CLI
loads and reports the modules first.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import time
from pathlib import Path

from flows import PROJECT_LOGGERS
from infra.extensions import ENV_VAR as EXTENSIONS_VAR

logger = logging.getLogger("rlpipe.cli")
_buffer: logging.handlers.MemoryHandler | None = None


def _buffer_logs() -> None:
    """Keep INFO records of the start-up (which stack or API a run uses) for the CLI."""
    global _buffer
    if _buffer is None:
        _buffer = logging.handlers.MemoryHandler(10_000, flushLevel=logging.CRITICAL + 1)
        for name in PROJECT_LOGGERS:
            logging.getLogger(name).addHandler(_buffer)
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.INFO)


def replay_early_logs() -> None:
    """Hand the records kept during the early start to the handlers set up since."""
    global _buffer
    if _buffer is None:
        return
    buffer, _buffer = _buffer, None
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).removeHandler(buffer)
    for record in buffer.buffer:
        logging.getLogger(record.name).handle(record)
    buffer.buffer.clear()


def start_services_early(argv: list[str], default_preset: str | None = None) -> bool:
    """Start the local Prefect API (unless ``PREFECT_API_URL`` is set) and connect Ray.

    A running local stack (``scripts/stack.sh up``) provides both instead, see
    :func:`infra.ops.stack_state.attach_running_stack`.

    Args:
        argv: The command line's arguments (without the program name).
        default_preset: The CLI's default preset (default: the train CLI's).

    Returns:
        True if the services were started; False if the arguments or the config did not
        parse (the CLI reports why), asked for help, or extension modules are set.
    """
    if any(arg in ("-h", "--help") for arg in argv) or os.environ.get(EXTENSIONS_VAR):
        return False
    try:
        from flows.cli_args import build_parser, cli_overrides
        from rl_core.config.loader import load_raw_config

        parser = build_parser(*([default_preset] if default_preset else []))
        args, unknown = parser.parse_known_intermixed_args(argv)
        if unknown:
            return False
        overrides = cli_overrides(args)
        _, raw = load_raw_config(args.config, overrides)
        from flows.terminal import quiet_worker_consoles

        quiet_worker_consoles(args.verbose)  # before Ray starts: its workers inherit it
    except (Exception, SystemExit):  # noqa: BLE001 - the CLI parses again and says why
        return False
    from infra.ops.prefect_api import start_prefect_api, stop_prefect_api
    from infra.ops.stack_state import attach_running_stack

    started = time.perf_counter()
    _buffer_logs()
    # The server starts before the config is validated (which imports torch): that second
    # is part of its boot. A config that then fails validation stops it again at once.
    try:
        attach_running_stack()
        server = start_prefect_api(_output_dir(raw) / ".prefect")
    except Exception:  # noqa: BLE001 - the CLI tries again and reports the error
        logger.debug("early start failed", exc_info=True)
        return False
    try:
        from rl_core.config import load_config

        cfg = load_config(args.config, overrides)
    except Exception:  # noqa: BLE001 - the CLI validates again and says why
        if server is not None:
            stop_prefect_api(server)
        return False
    try:
        from infra.cluster import ray_cluster
        from infra.driver.runtimes import runtime_class

        ray_cluster.connect_cluster(cfg.cluster)
        runtime_class(cfg).prestart(cfg)  # e.g. task workers warm up while the CLI imports
    except Exception:  # noqa: BLE001 - the CLI tries again and reports the error
        logger.debug("early start failed", exc_info=True)
        return False
    logger.debug("Ray connected in %.1fs (early)", time.perf_counter() - started)
    return True


def _output_dir(raw: dict) -> Path:
    """``run.output_dir`` of a config not yet validated (the schema's default if unset)."""
    from rl_core.config.run_sections import RunConfig

    run = raw.get("run")
    value = run.get("output_dir") if isinstance(run, dict) else None
    return Path(
        value if isinstance(value, str) and value else RunConfig.model_fields["output_dir"].default
    )
