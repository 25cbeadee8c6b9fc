"""learning_curve step: the run's key metrics vs step as a PNG in its MLflow artifacts."""

from __future__ import annotations

import logging
import time
from typing import Any

from prefect import task

from infra.driver.session import get_session
from infra.tracking.plots import PLOT_ARTIFACT, learning_curve_png
from tasks.options import STEP_OPTIONS

logger = logging.getLogger("rlpipe.learning_curve")


@task(name="learning_curve", task_run_name="learning_curve-{run_name}", **STEP_OPTIONS)
def learning_curve(session_id: str, run_name: str) -> dict[str, Any]:
    """Draw the learning curve from the MLflow metric history and log it (best effort)."""
    started = time.perf_counter()
    session = get_session(session_id)
    tracker = session.tracker
    if tracker is None or not session.cfg.tracking.learning_curve:
        return {}
    try:
        tracker.flush()
        png = learning_curve_png(
            tracker.client, tracker.run_id, f"{run_name} ({session.cfg.preset})"
        )
        if png is None:
            return {}
        folder, name = PLOT_ARTIFACT.rsplit("/", 1)
        tracker.log_files({name: png}, folder)
    except Exception as exc:  # noqa: BLE001 - a plot never fails a finished run
        logger.warning("could not log the learning curve: %s", exc)
        return {}
    return {"artifact": PLOT_ARTIFACT, "seconds": time.perf_counter() - started}
