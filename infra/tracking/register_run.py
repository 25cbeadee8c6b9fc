"""Register a training run's policy: export the checkpoint, log it, register it.

A checkpoint of the run (its best, or its latest: ``tracking.register_checkpoint``) is
exported as an rlpipe model directory (model config with secrets masked; also an MLflow
model where a flavor fits, :mod:`infra.tracking.mlflow_flavor`), logged to the MLflow run
as ``model/step_<step>`` (a resumed run that registers again keeps its earlier versions'
files) and registered as a new version (see
:mod:`infra.tracking.model_registry`). The version is scored with the run's evaluation of
exactly these weights (the evaluation logged at the checkpoint's step - 1); without one it
gets no score and cannot take the ``best`` alias.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from infra.tracking.model_registry import MODEL_ARTIFACT_DIR, register_version
from infra.tracking.secrets import redact_config

logger = logging.getLogger(__name__)
#: Run tags recording what the run registered (a rerun of a finished run skips it).
REGISTERED_TAG = "rlpipe.registered_model"
REGISTERED_STEP_TAG = "rlpipe.registered_step"


def metric_at(client: Any, run_id: str, key: str, step: int) -> float | None:
    """A metric's value logged at ``step`` (the latest one logged there), or None."""
    at = [m for m in client.get_metric_history(run_id, key) if m.step == step]
    return float(max(at, key=lambda m: m.timestamp).value) if at else None


def last_metric(client: Any, run_id: str, key: str) -> tuple[float, int] | None:
    """``(value, step)`` of a metric's last entry (highest step, then latest), or None."""
    history = client.get_metric_history(run_id, key)
    if not history:
        return None
    last = max(history, key=lambda m: (m.step, m.timestamp))
    return float(last.value), int(last.step)


def export_checkpoint_model(ref: Any, out_dir: Path, source: dict[str, Any]) -> dict[str, str]:
    """Export the checkpoint ``ref`` (a ``CheckpointRef``) as a model directory ``out_dir``.

    The directory is also an MLflow model where a flavor fits (see
    :mod:`infra.tracking.mlflow_flavor`).

    Returns:
        Version tags saying what the directory holds: ``weights`` (``full``, or ``merged``
        for a LoRA run, whose adapter alone is in ``adapter/``), for LoRA the base model's
        fingerprint, and ``mlflow_flavor`` (``transformers``, ``python_function`` or
        ``none``).
    """
    from infra.checkpoint.export import export_policy, policy_from_checkpoint, read_export_meta
    from infra.tracking.mlflow_flavor import FLAVOR_TAG, NO_FLAVOR, add_mlflow_flavor

    policy, config, spaces = policy_from_checkpoint(ref)
    export_policy(
        policy,
        redact_config(config["model"]),
        spaces,
        out_dir,
        source={**source, "step": ref.step, "checkpoint": ref.location},
    )
    del policy  # a language model's flavor loads the exported weights again
    meta = read_export_meta(out_dir)
    tags = {"weights": str(meta.get("weights", "full"))}
    if "adapter" in meta:
        tags["adapter"] = f"{meta['adapter']['dir']}/ ({meta['adapter']['format']})"
        tags["base_model_fingerprint"] = str(meta["base_model"]["fingerprint"])
    wanted = bool((config.get("tracking") or {}).get("mlflow_flavor", True))
    tags[FLAVOR_TAG] = add_mlflow_flavor(out_dir, config) if wanted else NO_FLAVOR
    return tags


def register_run_model(
    tracker: Any,
    store_uri: str,
    name: str,
    score_metric: str,
    tags: dict[str, str],
    trust: bool = False,
    move_best: bool = True,
    step: int | None = None,
) -> dict[str, Any]:
    """Export, log and register a checkpoint of the run (once per checkpoint step).

    Args:
        tracker: The run's ``MlflowTracker``.
        store_uri: The run's checkpoint store.
        name: Registered model name.
        score_metric: Metric whose last value scores the version (e.g. ``eval/return_mean``).
        tags: Version tags (run name, preset, config hash, ...).
        trust: The checkpoint's config may ask for the model's own code
            (``model.trust_remote_code``; see ``locate_checkpoint``).
        move_best: Registration may move the ``best`` alias (``tracking.promotion:
            on_register``); False leaves it to the promote flow.
        step: The checkpoint step to register (None: the latest committed one).

    Returns:
        ``registered_model`` (``models:/<name>/<version>``), ``version``, ``aliases``,
        ``score``, ``checkpoint_step``, ``seconds``; or ``skipped`` with the reason.
    """
    started = time.perf_counter()
    from infra.checkpoint.reader import locate_checkpoint

    client, run_id = tracker.client, tracker.run_id
    ref = locate_checkpoint(store_uri, step=step, trust=trust)
    step = int(ref.step)
    if client.get_run(run_id).data.tags.get(REGISTERED_STEP_TAG) == f"{name}:{step}":
        return {"skipped": f"checkpoint step {step} is already registered as {name}"}
    tracker.flush()  # the last evaluation's metrics may still be queued
    artifact_path = f"{MODEL_ARTIFACT_DIR}/{ref.folder}"
    with tempfile.TemporaryDirectory(prefix="rlpipe-register-") as tmp:
        model_dir = Path(tmp) / ref.folder
        weights = export_checkpoint_model(ref, model_dir, {**tags, "mlflow_run_id": run_id})
        tracker.log_artifacts(model_dir, artifact_path, config_files=())
    version_tags = {**tags, **weights, "checkpoint_step": str(step), "eval_metric": score_metric}
    score = metric_at(client, run_id, score_metric, step - 1)  # the evaluation of these weights
    if score is not None:
        version_tags["eval_step"] = str(step - 1)
    elif (last := last_metric(client, run_id, score_metric)) is not None:
        version_tags["eval_step"] = str(last[1])  # an evaluation of other weights: no score
    version = register_version(
        client,
        name,
        run_id,
        artifact_path,
        score,
        version_tags,
        description=f"run {tags.get('run_name', run_id)}, checkpoint step {step}",
        move_best=move_best,
    )
    tracker.set_tags({REGISTERED_TAG: version.uri, REGISTERED_STEP_TAG: f"{name}:{step}"})
    return {
        "registered_model": version.uri,
        "version": version.version,
        "aliases": list(version.aliases),
        "score": score,
        "checkpoint_step": step,
        "artifact_path": artifact_path,
        "seconds": time.perf_counter() - started,
    }
