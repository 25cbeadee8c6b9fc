"""TrainSession: everything one training run holds in the driver process.

Prefect flows and tasks receive only the session's id (a string) and look the session up
here, so no large object ever goes through Prefect's parameter handling or API.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from infra.checkpoint.commit import (
    apply_retention,
    commit_checkpoint,
    driver_parts,
    drop_partial_checkpoint,
    log_checkpoint_folder,
    restore_driver,
)
from infra.checkpoint.lease import RunLease
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.storage_full import (
    CheckpointStorageFull,
    storage_full_cause,
    storage_full_message,
)
from infra.checkpoint.store import CheckpointError, open_store
from infra.cluster import ray_cluster
from infra.driver.faults import FaultInjector
from infra.driver.guard import ITERATION_RETRIES, IterationGuard
from infra.driver.step_runtime import StepResult, StepRuntime, make_runtime
from infra.tracking import MlflowTracker, flatten_config
from rl_core.algorithms.naming import algorithm_name
from rl_core.config import RLPipeConfig
from rl_core.config.naming import eval_protocol, experiment_name, model_kind, task_name

logger = logging.getLogger(__name__)
_SESSIONS: dict[str, TrainSession] = {}

#: Set (e.g. by the CLI's SIGINT/SIGTERM handler) to stop training after the current
#: iteration, with a checkpoint, so that rerunning the same command resumes.
STOP_REQUESTED = threading.Event()


@dataclass
class RunState:
    """Driver-side counters saved in every checkpoint manifest."""

    iteration: int = 0  # iterations completed
    env_steps: int = 0
    best_eval_return: float | None = None
    last_eval_return: float | None = None
    initial_eval_return: float | None = None  # eval.before_training's result
    solved: bool = False
    best_eval_step: int | None = None  # the checkpoint step of the best evaluation


def config_hash(cfg: RLPipeConfig) -> str:
    """Short stable hash of a resolved config."""
    blob = json.dumps(cfg.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def default_tracking_uri(output_dir: Path) -> str:
    """MLflow on a SQLite file under the output directory."""
    return f"sqlite:///{(output_dir / 'mlflow.db').resolve()}"


def resolve_tracking_uri(configured: str | None, output_dir: Path) -> str:
    """``tracking.tracking_uri`` if set, else ``MLFLOW_TRACKING_URI``, else the SQLite file.

    The environment variable is how a deployment's worker (or the local stack) points every
    run at one MLflow server without a config change.
    """
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(output_dir)


def default_artifact_location(tracking_uri: str, output_dir: Path) -> str | None:
    """Artifact root of a new experiment when ``tracking.artifact_location`` is not set.

    A tracking server (``http(s)://``) decides itself (``mlflow server
    --artifacts-destination``, proxied to clients); a local store keeps artifacts next to
    its database under the output directory.
    """
    if tracking_uri.startswith(("http://", "https://")):
        return None
    return str(output_dir / "mlartifacts")


def identity_tags(cfg: RLPipeConfig, supervised: bool = False) -> dict[str, str]:
    """The MLflow tags saying what a run is: name, preset, task, model, algorithm.

    Args:
        cfg: The run's config.
        supervised: The run is supervised fine-tuning (its algorithm is ``sft``).
    """
    return {
        "rlpipe.run_name": cfg.run.name,
        "rlpipe.preset": cfg.preset,
        "rlpipe.task": task_name(cfg),
        "rlpipe.model_kind": model_kind(cfg),
        "rlpipe.eval_protocol": eval_protocol(cfg),
        "rlpipe.algorithm": algorithm_name(cfg.algorithm, supervised=supervised),
    }


class TrainSession:
    """Config, workers, checkpoint store, MLflow run and counters of one training run.

    Creating a session resumes from the run's latest committed checkpoint when one exists
    (``run.resume``), re-attaching the MLflow run recorded in it.

    Args:
        cfg: The validated config.
        tags: Extra MLflow tags (e.g. the Prefect flow run id).
        supervised: The run is supervised fine-tuning (tagged ``rlpipe.algorithm=sft``).

    Raises:
        LeaseHeldError: Another process is training this run (raised before anything of
            the run is read or written).
        CheckpointError: The checkpoint state conflicts with ``run.resume``, or the latest
            checkpoint is corrupt (raised before any worker starts).
    """

    def __init__(
        self, cfg: RLPipeConfig, tags: dict[str, str] | None = None, supervised: bool = False
    ) -> None:
        self.cfg = cfg
        #: The run is supervised fine-tuning (``flows/sft.py``): its algorithm is ``sft``.
        self.supervised = supervised
        #: Run tags given at the start (git commit, Prefect flow run), also for lineage.
        self.tags = dict(tags or {})
        self.id = uuid.uuid4().hex
        self.output_dir = Path(cfg.run.output_dir).resolve()
        self.run_dir = self.output_dir / cfg.run.name
        self.store_uri = run_store_uri(self.output_dir, cfg.run.name, cfg.run.checkpoint_uri)
        # one writer per run: taken before anything of the run is read or written
        self.lease = RunLease(self.store_uri, cfg.run.name, cfg.run.lease_ttl_s).acquire()
        try:
            self._open(tags)
        except BaseException:
            self.lease.release()
            raise

    def _open(self, tags: dict[str, str] | None) -> None:
        """Open the store, the MLflow run and the workers; resume (under the run lease)."""
        cfg = self.cfg
        self.store = open_store(self.store_uri)
        self.manifest = self.store.latest()
        self._check_resume_policy()
        self.state = RunState()
        self.config_hash = config_hash(cfg)
        self._seed_driver(cfg.run.seed)
        # Faults (RLPIPE_FAULTS) are injected into fresh runs only: a resumed run is the
        # recovery of a run that already met them.
        self.faults = FaultInjector.from_env(enabled=self.manifest is None)
        self.tracker, self.runtime = self._start_tracker_and_workers(tags or {})
        self.runtime.faults = self.faults
        self.guard = IterationGuard(self, ITERATION_RETRIES)
        #: Reward scoring fans out to Ray tasks (set once scoring in the reward task is slow).
        self.fanout_scoring = cfg.scoring_fanout_min_seconds() == 0
        self.resumed_from: int | None = None
        #: An error that ended an iteration for good (set by the iteration flow).
        self.fatal_error: BaseException | None = None
        #: A stop signal ended the run: its MLflow run ends KILLED (a resume: RUNNING).
        self.stopped_on_request = False
        #: Last step whose metrics are in the MLflow run (a replay does not log it again).
        self.logged_through = -1
        if self.manifest:
            self.restore(self.manifest)
            self.logged_through = self.tracker.last_logged_step() if self.tracker else -1
        self.write_worker_pids()
        _SESSIONS[self.id] = self

    def write_worker_pids(self) -> None:
        """Record worker process ids in ``<run dir>/workers.json`` (debugging, tests)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / "workers.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.runtime.worker_pids()))
        tmp.replace(path)

    # -- set-up --------------------------------------------------------------------------
    def _check_resume_policy(self) -> None:
        policy = self.cfg.run.resume
        if policy == "never" and self.manifest:
            raise CheckpointError(
                f"run {self.cfg.run.name!r} already has a checkpoint at step "
                f"{self.manifest['step']} ({self.store_uri}) and run.resume=never; pick another "
                "run.name or set run.resume=auto"
            )
        if policy == "must" and not self.manifest:
            raise CheckpointError(
                f"run.resume=must but run {self.cfg.run.name!r} has no committed checkpoint in "
                f"{self.store_uri}"
            )

    @staticmethod
    def _seed_driver(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def _start_tracker_and_workers(
        self, tags: dict[str, str]
    ) -> tuple[MlflowTracker | None, StepRuntime]:
        """Open the MLflow run in a thread while the worker groups start.

        The workers' start (processes importing torch) is the longest part of a run's
        start-up; the MLflow run (a new store's tables, params, the config artifact) is
        created meanwhile instead of before it. ``MlflowTracker`` uses ``MlflowClient``
        with an explicit run id, so it may be created in another thread.
        """
        cfg = self.cfg
        if not cfg.tracking.enabled:
            ray_cluster.connect_cluster(cfg.cluster)
            return None, make_runtime(cfg)
        with ThreadPoolExecutor(1, thread_name_prefix="rlpipe-mlflow-open") as pool:
            opening = pool.submit(self._open_tracker, tags)
            try:
                # fan-out tasks run on Ray whatever the runtime (even one without groups)
                ray_cluster.connect_cluster(cfg.cluster)
                runtime = make_runtime(cfg)
            except BaseException:
                _finish_quietly(opening, "FAILED")
                raise
            try:
                tracker = opening.result()
            except BaseException:
                runtime.shutdown()
                raise
        return tracker, runtime

    def _open_tracker(self, tags: dict[str, str]) -> MlflowTracker:
        track = self.cfg.tracking
        uri = resolve_tracking_uri(track.tracking_uri, self.output_dir)
        manifest = self.manifest or {}
        tracker = MlflowTracker(
            tracking_uri=uri,
            experiment_name=experiment_name(self.cfg),
            run_name=self.cfg.run.name,
            run_id=manifest.get("mlflow_run_id"),
            tags={
                **identity_tags(self.cfg, self.supervised),
                **({"mlflow.parentRunId": track.parent_run_id} if track.parent_run_id else {}),
                "rlpipe.config_hash": self.config_hash,
                **tags,
            },
            artifact_location=track.artifact_location
            or default_artifact_location(uri, self.output_dir),
            previous_tracking_uri=manifest.get("mlflow_tracking_uri"),
        )
        tracker.log_params(flatten_config(self.cfg.model_dump(mode="json")))
        if not tracker.resumed:
            tracker.log_dict(self.cfg.model_dump(mode="json"), "config/resolved_config.yaml")
        return tracker

    # -- checkpoints ---------------------------------------------------------------------
    def checkpoint(self) -> StepResult:
        """Save every worker's state and the counters, then commit (manifest last).

        Returns:
            The checkpoint step's result: worker seconds; ``info`` has the committed
            ``step``, its folder (``dir``) and, when logged to MLflow, ``artifact_path``.
        """
        self.lease.check()  # never write the run after another process took it over
        step = self.state.iteration
        try:
            saved, manifest = self._write_checkpoint(step)
        except Exception as exc:
            cause = storage_full_cause(exc)
            if cause is None:
                raise
            drop_partial_checkpoint(self.store, step, self.manifest)
            committed = self.manifest["step"] if self.manifest else None
            raise CheckpointStorageFull(
                storage_full_message(cause, step, committed, self.store_uri)
            ) from exc
        self.manifest = manifest
        self._apply_retention(step)
        result = StepResult(saved["seconds"], info={"dir": saved["dir"], "step": step})
        if self.tracker and self._log_checkpoint_due(step):
            result.info["artifact_path"] = log_checkpoint_folder(
                self.store, saved["dir"], self.tracker
            )
        return result

    def _write_checkpoint(self, step: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Every worker's state and the driver's files, then the manifest (the commit)."""
        saved = self.runtime.checkpoint_step(self.store_uri, step)
        manifest = commit_checkpoint(
            self.store,
            step,
            driver_parts(self.cfg.model_dump(mode="json"), self.runtime.spaces),
            {
                "run_name": self.cfg.run.name,
                "mlflow_run_id": self.tracker.run_id if self.tracker else None,
                "mlflow_tracking_uri": self.tracker.masked_tracking_uri if self.tracker else None,
                "config_hash": self.config_hash,
                "state": asdict(self.state),
            },
        )
        return saved, manifest

    def _apply_retention(self, step: int) -> None:
        """Delete checkpoints beyond ``run.keep_checkpoints`` (the best one stays)."""
        apply_retention(self.store, step, self.cfg.run.keep_checkpoints, self.state.best_eval_step)

    def _log_checkpoint_due(self, step: int) -> bool:
        every = self.cfg.tracking.log_checkpoint_interval
        final = step >= self.cfg.run.max_iterations or self.state.solved
        return final or (every > 0 and step % every == 0)

    def restore(self, manifest: dict[str, Any]) -> None:
        """Load the workers and counters from a committed checkpoint."""
        if manifest.get("config_hash") != self.config_hash:
            logger.warning(
                "resuming run %r with a config that differs from the checkpoint's (%s != %s)",
                self.cfg.run.name,
                self.config_hash,
                manifest.get("config_hash"),
            )
        step, trust = int(manifest["step"]), self.cfg.run.trust_checkpoint
        self.runtime.load_checkpoint(self.store_uri, manifest["dir"], step)
        restore_driver(self.store, manifest["dir"], step, trust)
        self.state = RunState(**manifest["state"])
        self.resumed_from = int(manifest["step"])
        logger.info("resumed run %r from checkpoint step %d", self.cfg.run.name, self.resumed_from)

    def rewind(self) -> int:
        """Restore the last committed checkpoint, or rebuild the run's start; returns the step.

        Used after workers holding state died: replaying from here is deterministic.
        """
        manifest = self.store.latest()
        if manifest is not None:
            self.restore(manifest)
            return int(manifest["step"])
        self.runtime.shutdown()  # no checkpoint yet: every worker starts over from the seed
        self.runtime = make_runtime(self.cfg)
        self.runtime.faults = self.faults
        self._seed_driver(self.cfg.run.seed)
        self.state = RunState()
        self.write_worker_pids()
        return 0

    def close(self, status: str = "FINISHED") -> None:
        """Finish the MLflow run, stop the workers, release the run lease."""
        unfired = self.faults.plan.pending()
        if unfired and status == "FINISHED":
            logger.warning(
                "fault injection: %s never fired (the run did not reach them)",
                ", ".join(str(f) for f in unfired),
            )
        try:
            if self.tracker:
                self.tracker.finish(status)
        finally:
            try:
                self.runtime.shutdown()
                _SESSIONS.pop(self.id, None)
            finally:
                self.lease.release()


def _finish_quietly(opening: Future[MlflowTracker], status: str) -> None:
    """End the MLflow run a thread is opening (when it opened) without raising."""
    try:
        opening.result().finish(status)
    except Exception:  # noqa: BLE001 - the caller raises the error that matters
        logger.debug("could not open or finish the MLflow run", exc_info=True)


def get_session(session_id: str) -> TrainSession:
    """Look up a live session by id.

    Raises:
        KeyError: No such session in this process.
    """
    try:
        return _SESSIONS[session_id]
    except KeyError:
        raise KeyError(
            f"no training session {session_id!r} in this process; iteration flows must run "
            "in the process of their train flow"
        ) from None
