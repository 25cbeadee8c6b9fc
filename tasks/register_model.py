"""register_model step: the run's final policy into the MLflow model registry."""

from __future__ import annotations

import logging
from typing import Any

from prefect import task

from infra.checkpoint.location import run_store_uri
from infra.checkpoint.store import CheckpointError, open_store, step_dir_name
from infra.driver.session import TrainSession, get_session
from infra.tracking.model_registry import EVAL_PROTOCOL_TAG
from infra.tracking.register_run import register_run_model
from rl_core.config import ConfigError, RLPipeConfig, load_config
from rl_core.config.lineage import data_fingerprint
from rl_core.config.naming import eval_protocol, registered_model_name, task_name
from tasks.options import STEP_OPTIONS

logger = logging.getLogger("rlpipe.register_model")
#: The Prefect event a registration emits (``prefect.yaml``'s promote trigger expects it).
REGISTERED_EVENT = "rlpipe.model.registered"


def parent_sft_run(cfg: RLPipeConfig) -> str:
    """The MLflow run id of the SFT run a warm-started run began from (``-``: none)."""
    if not cfg.run.warm_start:
        return "-"
    try:
        sft = load_config(cfg.run.warm_start, [f"run.output_dir={cfg.run.output_dir}"])
        store = run_store_uri(cfg.run.output_dir, sft.run.name, sft.run.checkpoint_uri)
        return str((open_store(store).latest() or {}).get("mlflow_run_id") or "unknown")
    except (ConfigError, CheckpointError, OSError) as exc:
        logger.warning("lineage: cannot read the warm start's run (%s)", exc)
        return "unknown"


def _data_fingerprint(cfg: RLPipeConfig) -> str:
    try:
        return data_fingerprint(cfg)
    except OSError as exc:
        logger.warning("lineage: cannot fingerprint the data (%s)", exc)
        return "unknown"


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
        # lineage: what it was trained on, from what, by which code and which flow run
        "data_fingerprint": _data_fingerprint(cfg),
        "parent_sft_run": parent_sft_run(cfg),
        # the code and flow run that trained it, as recorded when the run started
        "git_commit": session.tags.get("rlpipe.git_commit", "unknown"),
        "prefect_flow_run": session.tags.get("prefect.flow_run_id", ""),
    }
    pretrained = cfg.pretrained_model()  # the run's own model
    trust = cfg.run.trust_checkpoint or (pretrained is not None and pretrained.trust_remote_code)
    step, which = registered_step(session)
    result = register_run_model(
        tracker,
        session.store_uri,
        name,
        session.runtime.score_metric,
        tags,
        trust,
        move_best=cfg.tracking.promotion == "on_register",
        step=step,
    )
    result["which"] = which
    if "skipped" in result:
        logger.info("model registry: %s", result["skipped"])
    else:
        announce_registration(name, result["version"], cfg.run.name)
    return result


def registered_step(session: TrainSession) -> tuple[int | None, str]:
    """The checkpoint step a finished run registers (None: the latest) and why.

    ``tracking.register_checkpoint: best`` picks the checkpoint of the run's best evaluation
    when it exists (``run.checkpoint_best`` writes it); else the latest.
    """
    best = session.state.best_eval_step
    if session.cfg.tracking.register_checkpoint != "best":
        return None, "latest checkpoint (tracking.register_checkpoint=latest)"
    if best is None:
        return None, "latest checkpoint (the run has no evaluation)"
    if not session.store.exists(f"{step_dir_name(best)}/COMPLETE"):
        return None, f"latest checkpoint (no checkpoint of the best evaluation, step {best})"
    return best, f"best checkpoint (step {best}, eval {session.state.best_eval_return:.4g})"


def announce_registration(name: str, version: str, run_name: str) -> None:
    """Emit the Prefect event ``rlpipe.model.registered`` (in a flow run only).

    The ``promote-newest`` deployment's trigger (``prefect.yaml``) starts the promote flow
    on it. The resource is ``mlflow.model.<name>`` with the labels ``rlpipe.model`` (the
    registered model name) and ``rlpipe.model.version``.
    """
    from prefect.events import emit_event
    from prefect.runtime import flow_run

    if not flow_run.id:
        return
    emit_event(
        event=REGISTERED_EVENT,
        resource={
            "prefect.resource.id": f"mlflow.model.{name}",
            "prefect.resource.name": name,
            "rlpipe.model": name,
            "rlpipe.model.version": str(version),
        },
        related=[
            {
                "prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                "prefect.resource.role": "flow-run",
            }
        ],
        payload={"run_name": run_name, "version": str(version)},
    )
