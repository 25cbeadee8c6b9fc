"""The run loop shared by the train and SFT flows: session, iteration flows, MLflow, progress.

``train_session`` opens a :class:`~infra.driver.session.TrainSession` (workers, MLflow run,
resume) and ``run_training`` runs one child flow per iteration until the run is done,
logging each iteration's metrics to MLflow exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import tags as prefect_tags
from prefect.exceptions import TerminationSignal
from prefect.runtime import flow_run
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from flows.iteration import IterationResult, baseline_evaluation_flow, iteration_flow
from flows.iteration_metrics import log_progress, step_metrics, timing_metrics
from flows.masked_flow import warn_if_secret_parameters
from flows.orphan_runs import cancel_orphaned_children
from flows.prefect_ui import ProgressArtifact, publish_summary, run_tags, tag_flow_run
from flows.stop_signals import note_termination, reclaim_stop_signals
from infra.cluster.runtime_env import apply_base_env
from infra.cost import TOTAL_CPU, TOTAL_GPU, CostMeter, reserved_resources
from infra.driver.guard import ITERATION_RETRIES
from infra.driver.session import STOP_REQUESTED, TrainSession
from infra.extensions import load_extension_modules
from infra.hub_models import resolve_model_path
from infra.ops.prefect_api import lasting_flow_run_url, wait_for_configured_api
from infra.provenance import git_commit
from infra.tracking.register_run import last_metric
from infra.tracking.secrets import install_log_redaction
from rl_core.algorithms.naming import algorithm_name
from rl_core.config import ConfigError, RLPipeConfig, load_config
from rl_core.config.run_name_template import expand_run_name
from tasks.learning_curve import learning_curve
from tasks.register_model import register_model

logger = logging.getLogger("rlpipe.train")


def flow_run_namer(prefix: str) -> Callable[[], str]:
    """A flow-run namer: ``<prefix>-<run name>`` from the flow run's parameters.

    The run name is the ``run_name`` parameter, a ``run.name=`` override, else the preset's
    file stem.
    """

    def name() -> str:
        params = flow_run.parameters or {}
        run_name = params.get("run_name")
        if run_name:
            try:
                run_name = scheduled_run_name(run_name)
            except ConfigError:
                pass  # the flow itself fails with the message
        for override in params.get("overrides") or []:
            if override.startswith("run.name="):
                run_name = override.split("=", 1)[1]
        preset = params.get("preset")
        return f"{prefix}-{run_name or (Path(preset).stem if preset else 'default')}"

    return name


def scheduled_run_name(run_name: str) -> str:
    """``run_name`` with its placeholders (``{scheduled_date}``, ...) filled in.

    The time is the flow run's scheduled start (a deployment's schedule), else now; see
    :mod:`rl_core.config.run_name_template`.
    """
    when = flow_run.scheduled_start_time or datetime.now(UTC)
    return expand_run_name(run_name, when)


@contextmanager
def train_session(
    preset: str,
    overrides: list[str] | None,
    run_name: str | None,
    prepare: Callable[[RLPipeConfig], RLPipeConfig] | None = None,
    supervised: bool = False,
) -> Iterator[TrainSession]:
    """Load the config, open the session (workers, MLflow run, resume); close it at the end.

    Args:
        preset: Preset name or YAML path.
        overrides: Dotted overrides.
        run_name: Shortcut for ``run.name=...``.
        prepare: Makes the model directory exist before any worker starts (default:
            :func:`prepare_model_files`).
        supervised: The run is supervised fine-tuning (its algorithm is named ``sft``).

    The MLflow run ends FINISHED when the block completes, FAILED when it raises.
    """
    apply_base_env()
    install_log_redaction()
    load_extension_modules()  # deployments and scripts call the flows without the CLI
    warn_if_secret_parameters({"preset": preset, "overrides": overrides, "run_name": run_name})
    extra = [f"run.name={scheduled_run_name(run_name)}"] if run_name else []
    cfg = (prepare or prepare_model_files)(load_config(preset, [*(overrides or []), *extra]))
    tags = {
        "prefect.flow_run_id": str(flow_run.id or ""),
        # a CLI run's temporary API dies with it: link the UI of `prefect server start`
        "prefect.flow_run_url": lasting_flow_run_url(str(flow_run.id or ""), flow_run.ui_url),
        "rlpipe.git_commit": git_commit() or "unknown",
    }
    ui_tags = run_tags(cfg, supervised)
    tag_flow_run(ui_tags)
    session = TrainSession(cfg, tags=tags, supervised=supervised)
    if session.tracker and cfg.tracking.system_metrics:  # stopped by session.close
        session.tracker.start_system_metrics(cfg.tracking.system_metrics_interval)
    status = "FAILED"
    try:
        with prefect_tags(*ui_tags):  # child flows and task runs carry them too
            yield session
        status = "KILLED" if session.stopped_on_request else "FINISHED"
    finally:
        closing = time.perf_counter()
        session.close(status)
        logger.debug("session closed in %.1fs", time.perf_counter() - closing)


def prepare_model_files(cfg: RLPipeConfig) -> RLPipeConfig:
    """Make ``model.model_path`` a local absolute path; create the tiny test model if asked to.

    A Hugging Face hub id becomes its snapshot folder in the local Hugging Face cache
    (downloaded first with ``model.hub_download``; :mod:`infra.hub_models`).
    ``model.tiny_init`` creates the tiny test model at ``model.model_path`` if it is missing;
    a relative path of a tiny model is under ``run.output_dir`` (it is the run's own output,
    like its checkpoints), any other relative path under the working directory.
    Kinds whose model has no ``model_path`` (control policies) are returned unchanged.

    Raises:
        HubModelError: A hub id the run cannot load (not cached, incomplete, no download).
    """
    if cfg.pretrained_model() is None:
        return cfg
    cached = None if cfg.model.tiny_init else resolve_model_path(cfg.model)
    if cached is not None:
        cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update={"model_path": cached})})
    elif cfg.model.model_path and not Path(cfg.model.model_path).is_absolute():
        # workers may run elsewhere than the driver's working directory
        base = Path(cfg.run.output_dir) if cfg.model.tiny_init else Path()
        model = cfg.model.model_copy(
            update={"model_path": str((base / cfg.model.model_path).resolve())}
        )
        cfg = cfg.model_copy(update={"model": model})
    if cfg.model.tiny_init and cfg.model.model_path:
        if not (Path(cfg.model.model_path) / "config.json").is_file():
            from rl_core.models.tiny_lm import create_tiny_lm

            logger.info("creating the tiny test model at %s", cfg.model.model_path)
            create_tiny_lm(cfg.model.model_path, seed=cfg.run.seed)
    return cfg


def run_training(session: TrainSession, step_flow: Any = None) -> dict[str, Any]:
    """The loop of iteration flows, with timing, MLflow logging and progress lines.

    Args:
        session: The open training session.
        step_flow: The per-iteration child flow (default: the RL iteration flow).
    """
    cfg = session.cfg
    finished_before = already_finished(cfg, session.state, session.resumed_from)
    if finished_before:
        logger.warning("%s", finished_before)
    elif session.resumed_from is not None:
        logger.info("continuing %s from iteration %d", cfg.run.name, session.resumed_from)
    # Child flows get no heartbeat thread: joining it costs up to 1 s per iteration (it
    # sleeps in 1 s steps) and a 1 s flow needs no liveness pings; the train flow keeps its.
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        result = _iterate(session, step_flow or iteration_flow)
    result["already_finished"] = finished_before is not None
    result["prefect_flow_run_id"] = str(flow_run.id) if flow_run.id else None
    cancel_orphaned_children(result["prefect_flow_run_id"])
    result.update(finish_tracking(session, register=result["stopped"] is None))
    publish_summary(cfg, result, session.tracker.experiment_id if session.tracker else None)
    return result


def already_finished(cfg: RLPipeConfig, state: Any, resumed_from: int | None) -> str | None:
    """Why a resumed run has nothing left to train (its last iteration done, or solved).

    Returns:
        The message for the user, or None when the run has iterations left (or is new).
    """
    if resumed_from is None:
        return None
    if state.iteration < cfg.run.max_iterations and not state.solved:
        return None
    return (
        f"run {cfg.run.name} had already finished ({state.iteration} of "
        f"run.max_iterations={cfg.run.max_iterations} iterations"
        f"{', solved' if state.solved else ''}): nothing to train; to train more, raise "
        "run.max_iterations (continues this run) or start a new run with another run.name"
    )


def _iterate(session: TrainSession, step_flow: Any) -> dict[str, Any]:
    cfg = session.cfg
    it = session.state.iteration
    meter = cost_meter(session)
    stopped: str | None = None
    progress = ProgressArtifact(cfg.run.name, cfg.run.max_iterations)
    progress.update(it)
    reruns: dict[int, int] = {}  # iterations run again by this loop (their retry was dropped)
    if cfg.eval.before_training and it == 0 and session.state.initial_eval_return is None:
        try:
            _evaluate_before_training(session)
        except TerminationSignal as exc:
            note_termination(exc)
            logger.warning("SIGTERM during the evaluation before training")
    while it < cfg.run.max_iterations and not session.state.solved:
        started = time.perf_counter()
        samples_before = session.state.env_steps
        if STOP_REQUESTED.is_set():  # (a signal between the evaluation and this loop)
            stopped = _stop_on_request(session)
            break
        idle = session.runtime.idle_reason(it)
        if idle is not None:  # (e.g. an online run waiting for the next batch of feedback)
            logger.info("nothing to train at iteration %d (%s): stopping; rerun to go on", it, idle)
            _commit_before_stopping(session)
            stopped = idle
            break
        try:
            result = step_flow(session.id, it)
            reclaim_stop_signals()  # (inside the try: a signal before it is caught below)
        except TerminationSignal as exc:
            # The signal reached the engine of the iteration's flow run in the moments
            # around its body (the body itself stops after the iteration): the iteration
            # ran completely, or not at all, or between two attempts (then steps of the
            # failed attempt ran: back to the last checkpoint, which resumes exactly).
            note_termination(exc)
            journal = session.guard.journal
            if session.state.iteration == it and journal.iteration == it and journal.started:
                session.guard.rewind(it)
            stopped = _stop_on_request(session)
            break
        except Exception:
            fatal, session.fatal_error = session.fatal_error, None
            if STOP_REQUESTED.is_set():
                # Prefect cancels a deployment run by signalling its process group, which
                # holds the local Ray cluster's processes too: the workers died with the
                # same signal. Rebuilding them would outlive the grace period; stop at the
                # last committed checkpoint instead (as after a kill: it resumes exactly).
                logger.warning(
                    "iteration %d failed after a stop request (its workers stopped with the "
                    "run): stopping at the last committed checkpoint; rerun the same "
                    "command to resume",
                    it,
                )
                session.stopped_on_request = True
                stopped = "request"
                break
            if fatal is not None:  # the iteration failed for good (not retried)
                raise fatal from None
            rewound = session.guard.recover(it)  # dead workers: rebuild and replay
            if rewound is not None:
                result = IterationResult(rewound_to=rewound)
            elif session.guard.attempts_left(it) > 0 and reruns.get(it, 0) < ITERATION_RETRIES:
                # its retry was dropped (see IterationGuard.recover): the steps done are kept
                reruns[it] = reruns.get(it, 0) + 1
                logger.warning("iteration %d failed and was not retried; running it again", it)
                wait_for_configured_api()  # (a restarting API: the rerun would fail at once)
                continue
            else:
                raise
        if result.rewound_to is not None:
            logger.warning("workers were rebuilt; replaying from iteration %d", result.rewound_to)
            it = result.rewound_to
            continue
        state = session.state  # a rewind replaces it
        metrics = step_metrics(result.steps, state.env_steps)
        log_step = session.tracker is not None and it > session.logged_through
        if log_step:  # asynchronous: queued for MLflow's logging thread
            session.tracker.log_metrics(metrics, step=it)
            traces = (
                result.steps["reward"].info.get("agent_traces")
                if "reward" in result.steps
                else None
            )
            if traces:  # agent loops: a few trajectories, turn by turn
                session.tracker.log_agent_traces(traces, step=it)
        progress.update(state.iteration)  # (counted as orchestration)
        timing = timing_metrics(result, started, time.perf_counter(), metrics["time/compute"])
        cost = meter.add_iteration({**metrics, **timing}, state.env_steps - samples_before)
        if log_step:
            session.tracker.log_metrics({**timing, **cost}, step=it)
            session.logged_through = it
        log_progress(cfg.run.max_iterations, it, {**metrics, **timing})
        more = it + 1 < cfg.run.max_iterations and not state.solved
        if STOP_REQUESTED.is_set():
            stopped = _stop_on_request(session)
            break
        if more and meter.next_iteration_exceeds_budget():
            stopped = "budget"
            logger.warning(
                "stopped after iteration %d: another would pass run.budget_hours (%.4g of "
                "%.4g %s-hours spent); raise it and rerun the same command to continue",
                state.iteration,
                meter.spent_hours,
                meter.budget_hours,
                meter.budget_unit,
            )
            _commit_before_stopping(session)
            break
        it += 1
    state = session.state
    progress.update(state.iteration, force=True)
    return {
        "run_name": cfg.run.name,
        "algorithm": algorithm_name(cfg.algorithm, supervised=session.supervised),
        "iterations": state.iteration,
        "env_steps": state.env_steps,
        "solved": state.solved,
        "last_eval_return": state.last_eval_return,
        "best_eval_return": state.best_eval_return,
        "initial_eval_return": state.initial_eval_return,
        "resumed_from": session.resumed_from,
        "mlflow_run_id": session.tracker.run_id if session.tracker else None,
        "tracking_uri": session.tracker.tracking_uri if session.tracker else None,
        "checkpoint_dir": session.store_uri,
        "stopped": stopped,
        **meter.summary(),
    }


def _stop_on_request(session: TrainSession) -> str:
    """A stop signal arrived: commit the iterations run so far; the reason ``request``."""
    logger.warning(
        "stopped on request after iteration %d; rerun the same command to resume",
        session.state.iteration,
    )
    _commit_before_stopping(session)
    session.stopped_on_request = True
    return "request"


def _commit_before_stopping(session: TrainSession) -> None:
    """Checkpoint the iterations run so far unless the last checkpoint holds them already."""
    if session.manifest is None or session.manifest["step"] != session.state.iteration:
        session.checkpoint()


def cost_meter(session: TrainSession) -> CostMeter:
    """The run's cost meter, continuing the totals logged before a resume."""
    meter = CostMeter(reserved_resources(session.runtime.groups), session.cfg.run.budget_hours)
    tracker = session.tracker
    if tracker is not None and session.resumed_from is not None:
        totals = [last_metric(tracker.client, tracker.run_id, k) for k in (TOTAL_CPU, TOTAL_GPU)]
        meter.resume_from(*(total[0] if total else None for total in totals))
    return meter


def finish_tracking(session: TrainSession, register: bool = True) -> dict[str, Any]:
    """End-of-run MLflow content: the learning-curve plot and the model registration.

    A run stopped on request or by its budget (it will resume) is plotted but not registered
    (``register`` False).
    """
    if session.tracker is None:
        return {}
    run_name = session.cfg.run.name
    plotted = learning_curve(session.id, run_name)
    if plotted:
        logger.info("learning curve %s (%.1fs)", plotted["artifact"], plotted["seconds"])
    if not register:
        return {}
    registered = register_model(session.id, run_name)
    if "registered_model" not in registered:
        return {}
    logger.info(
        "registered %s: the %s (aliases %s, %.1fs)",
        registered["registered_model"],
        registered["which"],
        ", ".join(registered["aliases"]) or "none",
        registered["seconds"],
    )
    return {
        "registered_model": registered["registered_model"],
        "registered_checkpoint": registered["which"],
    }


def _evaluate_before_training(session: TrainSession) -> None:
    """Evaluate the starting weights; ``eval/*`` metrics go to MLflow at step 0."""
    result = baseline_evaluation_flow(session.id)
    reclaim_stop_signals()
    metrics = {k: v for k, v in result.metrics.items() if k.startswith("eval/")}
    if session.tracker:
        session.tracker.log_metrics(metrics, step=0)
    shown = metrics.get("eval/accuracy", metrics["eval/return_mean"])
    logger.info("before training | eval %.3f", shown)
