"""The running local stack's state file, and attaching a run to that stack.

``scripts/stack.sh up`` writes ``stack.json`` (URLs, process ids, the variables a client
needs) into its home folder. A train or SFT run started while that stack is up uses it
instead of starting its own services: its Prefect API (the run shows in the stack's UI),
its MLflow server and, when the stack has one, its Ray head. That skips the start of a
local Prefect server and of a local Ray cluster, several seconds of every run's start-up.

This module imports nothing heavy: the CLI calls it before it imports Prefect.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from infra.ops.prefect_profile import answers
from infra.processes import pid_alive

logger = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
STATE_FILE = "stack.json"
#: Where the CLI looks for a running stack (default: ``.stack`` in the project root).
HOME_VAR = "RLPIPE_STACK_HOME"
#: ``off`` keeps a run on its own services even while a stack is up.
SWITCH_VAR = "RLPIPE_STACK"
#: The services a run takes from the stack (each only where the environment has none).
SERVICE_VARS = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")


def default_home() -> Path:
    """The stack home the CLI looks in: ``$RLPIPE_STACK_HOME`` or ``<project>/.stack``."""
    return Path(os.environ.get(HOME_VAR) or PROJECT_ROOT / ".stack")


def read_state(home: Path) -> dict | None:
    """The ``stack.json`` of a stack started from ``home`` (None if there is none)."""
    path = home / STATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def running_stack(home: Path, timeout: float = 1.0) -> dict | None:
    """The state of the stack running from ``home``, if its process lives and its API answers.

    Args:
        home: The stack's home folder.
        timeout: Seconds to wait for the Prefect API's health check.
    """
    state = read_state(home)
    if not state or not isinstance(state.get("pid"), int) or not pid_alive(state["pid"]):
        return None
    api = state.get("env", {}).get("PREFECT_API_URL")
    if not api:
        return None
    return state if answers(api, timeout) else None


def attach_running_stack(home: Path | None = None) -> dict[str, str]:
    """Point this process at a running local stack's services, where none is configured.

    Does nothing when ``PREFECT_API_URL`` is already set (the user chose an API), when
    ``RLPIPE_STACK=off``, or when no stack answers. Otherwise it exports the stack's
    ``PREFECT_API_URL`` and, unless already set, its ``MLFLOW_TRACKING_URI`` and (for a
    stack started with ``--ray``) ``RAY_ADDRESS``; the config's ``tracking.tracking_uri``
    and ``cluster.address`` still take precedence over them.

    Args:
        home: The stack's home folder (default: :func:`default_home`).

    Returns:
        The variables it exported (empty if it attached to nothing).
    """
    if os.environ.get(SWITCH_VAR, "").strip().lower() == "off":
        return {}
    if os.environ.get("PREFECT_API_URL"):
        return {}
    state = running_stack(home or default_home())
    if state is None:
        return {}
    offered = state.get("env", {})
    applied = {
        key: str(offered[key])
        for key in SERVICE_VARS
        if offered.get(key) and not os.environ.get(key)
    }
    os.environ.update(applied)
    logger.info(
        "using the running local stack (%s): %s; set %s=off for a run's own services",
        state.get("home", home),
        ", ".join(f"{key}={value}" for key, value in applied.items()),
        SWITCH_VAR,
    )
    return applied
