"""MLflow tracking through ``MlflowClient`` with an explicit run id (thread-safe).

The fluent API's active run is thread-local (None inside Prefect task threads), so every
call here names the run id. Metric batches are logged asynchronously so tracking stays
off the iteration's critical path; :meth:`MlflowTracker.flush` waits for them. While a
tracking server does not answer, the batches wait in MLflow's queue and its client retries
them (:mod:`infra.tracking.outage`), so training goes on through a short outage.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from infra.tracking.outage import install_retry_notice, mlflow_retry_budget_s
from infra.tracking.secrets import MASK, redact_config, redact_text, redacted_json_files
from infra.tracking.system_metrics import start_system_metrics

logger = logging.getLogger(__name__)
#: Experiment tag the MLflow UI reads to pick its view (model training or GenAI).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_\-. /:]")
MAX_PARAM_LEN = 6000
#: Tags of a run that continues a training run whose MLflow run is in another store.
PREVIOUS_RUN_TAG = "rlpipe.previous_mlflow_run_id"
PREVIOUS_URI_TAG = "rlpipe.previous_tracking_uri"


def flatten_config(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a nested config to dotted keys with string values (secrets masked)."""
    return _flatten(redact_config(tree), prefix)


def _flatten(tree: dict[str, Any], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{name}."))
            continue
        text = MASK if value == MASK else json.dumps(value, default=str)
        out[metric_name(name)] = text[:MAX_PARAM_LEN]
    return out


def metric_name(name: str) -> str:
    """Make ``name`` valid for MLflow (replace characters it rejects)."""
    return _BAD_CHARS.sub("_", name)


class MlflowTracker:
    """One MLflow run of one training run.

    Args:
        tracking_uri: MLflow tracking URI.
        experiment_name: Experiment (created if missing).
        run_name: Display name of a new run.
        run_id: Re-attach to this existing run instead of creating one (resume). If the
            store has no such run (the tracking URI changed since, e.g. a checkpoint made
            with a local SQLite store resumed against a tracking server), a new run is
            created and linked to it by the tags :data:`PREVIOUS_RUN_TAG` and
            :data:`PREVIOUS_URI_TAG`, with a warning.
        tags: Tags set on the run (values masked).
        artifact_location: Artifact root of a newly created experiment (None: MLflow's).
        previous_tracking_uri: Where ``run_id`` was logged (for the link and the warning).
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment_name: str,
        run_name: str,
        run_id: str | None = None,
        tags: dict[str, str] | None = None,
        artifact_location: str | None = None,
        previous_tracking_uri: str | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        if tracking_uri.startswith(("http://", "https://")):
            install_retry_notice()
        self.client = MlflowClient(tracking_uri)
        experiment = self.client.get_experiment_by_name(experiment_name)
        if experiment is None:
            self.experiment_id = self.client.create_experiment(
                experiment_name, artifact_location=artifact_location
            )
        else:
            self.experiment_id = experiment.experiment_id
            _warn_if_other_location(experiment, artifact_location)
        if experiment is None or EXPERIMENT_KIND_TAG not in experiment.tags:
            # the MLflow UI opens it in its model-training view, not the GenAI one
            self.client.set_experiment_tag(
                self.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND
            )
        #: The checkpoint's MLflow run, when it was not found here and a new run continues it.
        self.previous_run_id: str | None = None
        self.resumed = bool(run_id) and self._run_exists(str(run_id))
        if self.resumed:
            self.run_id = str(run_id)
            self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))
            if tags:
                self.set_tags(tags)
        else:
            new_tags = dict(tags or {})
            if run_id:
                self.previous_run_id = run_id
                new_tags[PREVIOUS_RUN_TAG] = run_id
                new_tags[PREVIOUS_URI_TAG] = previous_tracking_uri or "unknown"
            run = self.client.create_run(
                self.experiment_id, run_name=run_name, tags=_masked_tags(new_tags)
            )
            self.run_id = run.info.run_id
            if run_id:
                self._warn_continued(run_id, previous_tracking_uri)
        self._pending: list[Any] = []
        self._system_monitor: Any = None

    def log_params(self, params: dict[str, str]) -> None:
        """Log params (skips keys already logged with the same value, e.g. on resume)."""
        existing = self.client.get_run(self.run_id).data.params
        fresh = [Param(k, v) for k, v in params.items() if existing.get(k) != v]
        changed = [p.key for p in fresh if p.key in existing]
        if changed:
            logger.warning("params changed since the run started (not re-logged): %s", changed)
            fresh = [p for p in fresh if p.key not in existing]
        for i in range(0, len(fresh), 100):
            self.client.log_batch(self.run_id, params=fresh[i : i + 100])

    @property
    def masked_tracking_uri(self) -> str:
        """The tracking URI with credentials masked (for manifests, tags and messages)."""
        return redact_text(self.tracking_uri)

    def _run_exists(self, run_id: str) -> bool:
        """Whether this tracking store has run ``run_id`` (other errors are raised)."""
        try:
            self.client.get_run(run_id)
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise
        return True

    def _warn_continued(self, previous_run_id: str, previous_uri: str | None) -> None:
        logger.warning(
            "MLflow run %s of this run's checkpoint is not in the tracking store %s (it was "
            "logged to %s); continuing in a new MLflow run %s, tagged %s=%s",
            previous_run_id,
            self.masked_tracking_uri,
            redact_text(previous_uri) if previous_uri else "a store the checkpoint does not name",
            self.run_id,
            PREVIOUS_RUN_TAG,
            previous_run_id,
        )

    def set_tags(self, tags: dict[str, str]) -> None:
        """Set run tags (values masked)."""
        batch = [RunTag(k, v) for k, v in _masked_tags(tags).items()]
        self.client.log_batch(self.run_id, tags=batch)

    def log_metrics(self, metrics: dict[str, float], step: int, synchronous: bool = False) -> None:
        """Log numeric metrics at ``step`` (non-numeric values are skipped)."""
        now = int(time.time() * 1000)
        batch = [
            Metric(metric_name(k), float(v), now, step)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        for i in range(0, len(batch), 200):
            op = self.client.log_batch(
                self.run_id, metrics=batch[i : i + 200], synchronous=synchronous
            )
            if op is not None:
                self._pending.append(op)
        self._drop_sent()

    def last_logged_step(self, key: str = "time/iteration") -> int:
        """The highest step at which ``key`` was logged in this run (-1 if never)."""
        history = self.client.get_metric_history(self.run_id, metric_name(key))
        return max((m.step for m in history), default=-1)

    def _drop_sent(self) -> None:
        """Forget batches already sent (a long run queues one per iteration)."""
        still_queued = []
        for op in self._pending:
            futures = getattr(op, "_operation_futures", None)
            if futures is None or not all(f.done() for f in futures):
                still_queued.append(op)
            else:
                self._wait_for(op)
        self._pending = still_queued

    def _wait_for(self, op: Any) -> None:
        """Wait for one queued batch; one that failed is logged, not raised."""
        try:
            op.wait()
        except MlflowException as exc:
            logger.error(
                "metrics could not be sent to MLflow at %s after retrying for about %.0f s; "
                "they are missing from the run: %s",
                self.masked_tracking_uri,
                mlflow_retry_budget_s(),
                redact_text(str(exc))[:500],
            )

    def flush(self) -> None:
        """Wait for asynchronously logged metrics.

        A batch that could not be sent (the server did not answer for longer than MLflow's
        client retries) is logged as an error: the training it describes is already
        committed, so the run is not failed for it.
        """
        for op in self._pending:
            self._wait_for(op)
        self._pending.clear()

    def log_dict(self, data: dict[str, Any], artifact_file: str) -> None:
        """Log a dict as a JSON or YAML artifact (by extension), secrets masked."""
        self.client.log_dict(self.run_id, redact_config(data), artifact_file)

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        """Log rows (dicts with the same keys) as an MLflow table artifact (``.json``)."""
        columns = {key: [row.get(key) for row in rows] for key in rows[0]}
        self.client.log_table(self.run_id, data=columns, artifact_file=artifact_file)

    def log_agent_traces(self, rows: list[dict[str, Any]], step: int) -> None:
        """Log agent trajectories as traces of this run (:mod:`infra.tracking.agent_traces`).

        A failure is logged as a warning: traces are for reading, never worth a run.
        """
        from infra.tracking.agent_traces import log_agent_traces

        try:
            log_agent_traces(self.client, self.experiment_id, self.run_id, rows, step)
        except Exception as exc:  # noqa: BLE001 - observability must not end the run
            logger.warning(
                "could not log %d agent traces: %s: %s", len(rows), type(exc).__name__, exc
            )

    def log_dataset(
        self, name: str, source: str, digest: str, profile: dict[str, Any], context: str
    ) -> None:
        """Record a dataset as an input of the run (MLflow's Datasets tab).

        Args:
            name: The dataset's name.
            source: Where it lives (a folder or URI).
            digest: A short fingerprint of its content.
            profile: Counts shown with it (episodes, steps, ...).
            context: Its role in the run (``demonstrations``, ``training``).
        """
        from mlflow.entities import Dataset, DatasetInput, InputTag

        dataset = Dataset(
            name=name,
            digest=digest,
            source_type="local",
            source=json.dumps({"uri": source}),
            profile=json.dumps(profile),
        )
        tags = [InputTag(key="mlflow.data.context", value=context)]
        self.client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags)])

    def log_text(self, text: str, artifact_file: str) -> None:
        """Log text as an artifact."""
        self.client.log_text(self.run_id, text, artifact_file)

    def log_artifacts(
        self,
        local_dir: str | os.PathLike,
        artifact_path: str,
        config_files: tuple[str, ...] = ("config.json",),
    ) -> None:
        """Upload a directory's files under ``artifact_path``, secrets masked in JSON files.

        Args:
            local_dir: The directory.
            artifact_path: Target folder in the run's artifacts.
            config_files: Relative paths of rlpipe config files in it, whose secret-named
                keys are masked too (see :func:`~infra.tracking.secrets.redacted_json_files`).
        """
        redacted = redacted_json_files(local_dir, config_files)
        if not redacted:
            self.client.log_artifacts(self.run_id, str(local_dir), artifact_path)
            return
        for path in sorted(Path(local_dir).rglob("*")):
            rel = path.relative_to(local_dir).as_posix()
            if rel in redacted:
                self.client.log_text(self.run_id, redacted[rel], f"{artifact_path}/{rel}")
            elif path.is_file():
                folder = str(Path(artifact_path, rel).parent.as_posix())
                self.client.log_artifact(self.run_id, str(path), folder)

    def log_files(self, files: dict[str, bytes], artifact_path: str) -> None:
        """Upload in-memory files (name → bytes) under ``artifact_path``."""
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in files.items():
                target = Path(tmp) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            self.log_artifacts(tmp, artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        """Flush pending metrics and mark the run ``FINISHED``/``FAILED``/``KILLED``."""
        if self._system_monitor is not None:
            self._system_monitor.finish()
            self._system_monitor = None
        self.flush()
        self.client.set_terminated(self.run_id, status=status)

    def start_system_metrics(self, interval: float) -> None:
        """Sample ``system/*`` metrics every ``interval`` s until :meth:`finish` (idempotent)."""
        if self._system_monitor is None:
            self._system_monitor = start_system_metrics(
                self.run_id, self.tracking_uri, interval, resume=self.resumed
            )


def _masked_tags(tags: dict[str, Any]) -> dict[str, str]:
    """Tag values as strings, secrets masked (URIs with credentials, tokens)."""
    return {key: redact_text(str(value)) for key, value in tags.items()}


def _normalized_location(location: str) -> str:
    """An artifact location comparable across spellings (``file://``, trailing slash)."""
    text = location.removeprefix("file://").rstrip("/")
    return str(Path(text).resolve()) if "://" not in text else text


def _warn_if_other_location(experiment: Any, wanted: str | None) -> None:
    """Warn when an existing experiment's artifact root is not the configured one."""
    current = experiment.artifact_location or ""
    if wanted and _normalized_location(current) != _normalized_location(wanted):
        logger.warning(
            "MLflow experiment %r already exists with artifact location %s; its runs keep "
            "logging there, not to %s (use another tracking.experiment_name to change it)",
            experiment.name,
            current,
            wanted,
        )


def parent_experiment_name(tracking_uri: str, run_id: str | None) -> str | None:
    """The experiment of run ``run_id`` (None: no id, or no such run at ``tracking_uri``).

    Runs that point at a parent (``mlflow.parentRunId``) go to its experiment, so the MLflow
    UI nests them under it.
    """
    if not run_id:
        return None
    client = MlflowClient(tracking_uri)
    try:
        experiment_id = client.get_run(run_id).info.experiment_id
        return client.get_experiment(experiment_id).name
    except MlflowException:
        return None


#: The MLflow UI's view for model training (its default is the GenAI one, which files
#: runs under "Evaluation runs").
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


def mlflow_run_url(ui_base: str, experiment_id: str | None, run_id: str) -> str:
    """The MLflow UI's page of a run, opened in the model-training view."""
    return (
        f"{ui_base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING_VIEW}"
    )
