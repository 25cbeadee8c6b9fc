"""register_model step: the run's final policy into the MLflow model registry."""

from __future__ import annotations

import logging
from typing import Any

from prefect import task

from infra.session import get_session
from infra.tracking.model_registry import EVAL_PROTOCOL_TAG
from infra.tracking.register_run import register_run_model
from rl_core.config.naming import eval_protocol, registered_model_name, task_name
from tasks.options import STEP_OPTIONS

logger = logging.getLogger("rlpipe.register_model")


@task(name="register_model", task_run_name="register_model-{run_name}", **STEP_OPTIONS)
def register_model(session_id: str, run_name: str) -> dict[str, Any]:
    """Export the latest checkpoint, log it to the MLflow run and register a model version.

    Not retried (a retry after the version was created would register it twice); a rerun
    of the finished run registers what is missing.
    """
    session = get_session(session_id)
    cfg, tracker = session.cfg, session.tracker
    name = registered_model_name(cfg)
    if tracker is None or name is None:
        return {"skipped": "tracking or tracking.registered_model_name is off"}
    if session.store.latest() is None:
        return {"skipped": "the run has no committed checkpoint"}
    tags = {
        "run_name": cfg.run.name,
        "preset": cfg.preset,
        "config_hash": session.config_hash,
        "task": task_name(cfg),
        EVAL_PROTOCOL_TAG: eval_protocol(cfg),
    }
    trust = cfg.run.trust_checkpoint or cfg.model.trust_remote_code  # the run's own model
    result = register_run_model(
        tracker, session.store_uri, name, session.runtime.score_metric, tags, trust
    )
    if "skipped" in result:
        logger.info("model registry: %s", result["skipped"])
    return result
