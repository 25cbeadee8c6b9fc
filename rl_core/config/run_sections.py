"""Config sections about running a job rather than the learning problem.

What and where (``run``), the Ray cluster (``cluster``), evaluation (``eval``), MLflow
(``tracking``) and step deadlines and worker liveness (``timeouts``). Part of the one
schema (:mod:`rl_core.config.schema` assembles it).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from rl_core.config.limits import (
    MAX_ITERATIONS,
    MAX_WORKERS,
)
from rl_core.config.naming import MODEL_URI, MODEL_URI_FORMS
from rl_core.config.sections import Section

_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
#: A run name: it becomes a folder (and an S3 key part), so one path component only.
RUN_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RUN_NAME_RULE = "use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def is_valid_run_name(value: object) -> bool:
    """Whether ``value`` is a valid run name (see :data:`RUN_NAME_PATTERN`; never ``.``/``..``)."""
    return (
        isinstance(value, str)
        and value not in (".", "..")
        and RUN_NAME_PATTERN.fullmatch(value) is not None
    )


def check_run_name(value: str) -> str:
    """Return ``value`` if it is a valid run name.

    Raises:
        ValueError: It is not (one line naming the value and what is allowed).
    """
    if not is_valid_run_name(value):
        raise ValueError(f"run name {value!r} is not valid: {RUN_NAME_RULE}")
    return value


def check_storage_uri(value: str | None, schemes: tuple[str, ...] | None) -> str | None:
    """Validate a storage location: a local path or ``scheme://...`` (never credentials).

    Args:
        value: The location (None passes).
        schemes: Allowed URI schemes (None: any); ``s3://`` URIs must name a valid bucket.
    """
    if value is None or "://" not in value:
        return value
    scheme, _, rest = value.partition("://")
    if schemes is not None and scheme.lower() not in schemes:
        allowed = ", ".join(f"{s}://bucket/prefix" for s in schemes)
        raise ValueError(f"{value!r}: expected a local path or {allowed}")
    if "@" in rest.split("/", 1)[0]:
        raise ValueError("credentials do not belong in a URI here; use environment variables")
    if scheme.lower() == "s3" and not _S3_URI.match(value):
        raise ValueError(f"{value!r} is not s3://<bucket>[/prefix] with a valid bucket name")
    return value


class RunConfig(Section):
    """What to run and where its outputs go."""

    name: str = "ppo-cartpole"
    seed: int = Field(0, ge=0)
    max_iterations: int = Field(100, ge=1, le=MAX_ITERATIONS)
    checkpoint_interval: int = Field(
        5,
        ge=0,
        le=MAX_ITERATIONS,
        description="Iterations between checkpoints; 0 = only at the end.",
    )
    checkpoint_best: bool = Field(
        True,
        description="Also checkpoint after each evaluation that beats every earlier one "
        "(eval/return_mean), so the best weights exist to keep and to register.",
    )
    keep_checkpoints: int | None = Field(
        None,
        ge=1,
        le=MAX_ITERATIONS,
        description="Keep the last N committed checkpoints plus the best one; older ones are "
        "deleted after each commit (local stores). The one latest.json points at is never "
        "deleted. None: keep all.",
    )
    eval_interval: int = Field(
        5,
        ge=0,
        le=MAX_ITERATIONS,
        description="Iterations between evaluations; 0 = never during training.",
    )
    stop_at_eval_return: float | None = Field(
        None, description="Stop once an evaluation's mean return reaches this."
    )
    stop_at_eval_success: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Stop once an evaluation's success rate (`eval/success_rate`, of envs "
        "that report success, such as the manipulation env types) reaches this.",
    )
    mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: every rollout waits for the update before it and the update for "
        "the rollout; async: env workers collect (rollout workers generate) the next "
        "batches, at most algorithm.max_staleness weight versions old, while the trainer "
        "updates (embodied PPO and reasoning runs, separate rollout workers; docs/async.md).",
    )
    budget_hours: float | None = Field(
        None,
        gt=0.0,
        allow_inf_nan=False,
        description="Stop cleanly (checkpoint, exit code 130) before an iteration would take "
        "the run past this many resource-hours: GPU-hours when its workers reserve GPUs, "
        "else CPU-hours (reserved resources x wall time, cost/* in MLflow). None: no budget.",
    )
    output_dir: str = Field("outputs", min_length=1)
    checkpoint_uri: str | None = Field(
        None,
        min_length=1,
        description="Where checkpoint stores live: a local path or s3://bucket/prefix; the "
        "run's store is <checkpoint_uri>/<run.name>. None: <output_dir>/<run.name>/checkpoints. "
        "S3 endpoint and credentials come from the environment (docs/s3.md).",
    )
    resume: Literal["auto", "never", "must"] = Field(
        "auto",
        description="auto: continue the run's latest checkpoint if one exists; never: refuse if one exists; must: fail without one.",
    )
    warm_start: str | None = Field(
        None,
        description="Preset or YAML of an SFT run (flows/sft.py) to start from: its exported "
        "model <output_dir>/<its run name>/model becomes model.model_path (a control policy: "
        "model.init_weights), and it is run "
        "first when that model does not exist yet.",
    )
    init_from: str | None = Field(
        None,
        min_length=1,
        description="Weights a new run starts from (a resumed run continues its checkpoint "
        "instead): a registered model models:/<name>@<alias>, models:/<name>/<version> or "
        "models:/<name>/latest of the tracking server's registry, or the folder of an exported "
        "model (rlpipe_model.json). Its model type must be model.model_type. With run_name "
        "placeholders, each scheduled run of a deployment trains a new run from the "
        "registry's best (docs/deployments.md).",
    )
    lease_ttl_s: float = Field(
        60.0,
        ge=2,
        le=86400,
        description="Run lease: seconds without renewal after which a process on another "
        "host may take a crashed run over (renewed every lease_ttl_s/4; docs/deployments.md).",
    )
    trust_checkpoint: bool = Field(
        False,
        description="Load a checkpoint whose pickled parts (env states, sharded-trainer "
        "metadata) are not signed with this user's key (checkpoints from another user or "
        "machine, or written before signing), with a warning; CLI --trust-checkpoint. Only "
        "for checkpoints from a source you trust: unpickling can run code.",
    )

    @field_validator("name")
    @classmethod
    def _valid_run_name(cls, value: str) -> str:
        if not is_valid_run_name(value):
            raise ValueError(f"not a valid run name: {RUN_NAME_RULE}")
        return value

    @field_validator("checkpoint_uri")
    @classmethod
    def _checkpoint_uri_supported(cls, value: str | None) -> str | None:
        return check_storage_uri(value, ("s3",))

    @field_validator("init_from")
    @classmethod
    def _init_from_form(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("models:") and not MODEL_URI.match(value):
            raise ValueError(f"{value!r} is not {MODEL_URI_FORMS}")
        return value

    @model_validator(mode="after")
    def _one_starting_model(self) -> RunConfig:
        if self.init_from and self.warm_start:
            raise ValueError(
                "run.init_from and run.warm_start both name the starting model: set one"
            )
        return self


class EvalConfig(Section):
    """Evaluation episodes (deterministic actions by default)."""

    num_tasks: int = Field(
        1, ge=1, le=MAX_WORKERS, description="Parallel Ray tasks the episodes fan out to."
    )
    before_training: bool = Field(
        False,
        description="Evaluate the starting weights before the first iteration of a new run "
        "(logged at step 0), so the gain over a warm start shows in MLflow.",
    )


class TrackingConfig(Section):
    """MLflow tracking."""

    enabled: bool = True
    mlflow_flavor: bool = Field(
        True,
        description="Registered models are MLflow models too (mlflow.transformers / "
        "mlflow.pyfunc load them). A language model's flavor loads and saves its weights "
        "once more when it is registered (minutes and its size in CPU memory for a 7B "
        "model); false registers rlpipe's model folder alone.",
    )
    tracking_uri: str | None = Field(
        None,
        description="None: MLFLOW_TRACKING_URI if set, else a sqlite file under run.output_dir.",
    )
    experiment_name: str | None = Field(
        None,
        description="None: named by what is trained, '<task>-<model type>' (the env id or "
        "prompt set, e.g. 'CartPole-v1-mlp_actor_critic').",
    )
    parent_run_id: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{32}$",
        description="MLflow run this run is a child of (the MLflow UI nests it there); set by "
        "rlpipe sweep for its runs.",
    )
    log_checkpoint_interval: int = Field(
        0,
        ge=0,
        le=MAX_ITERATIONS,
        description="Log a checkpoint as an artifact every N iterations (0 = only the final one).",
    )
    system_metrics: bool = Field(
        True,
        description="Log MLflow system metrics (system/*: CPU, memory, disk, network; GPU "
        "with pynvml) of the driver's machine while the run trains.",
    )
    system_metrics_interval: float = Field(
        10.0, gt=0.0, description="Seconds between system-metric samples."
    )
    learning_curve: bool = Field(
        True, description="Log plots/learning_curve.png (key metrics vs step) at the end."
    )
    agent_traces: int = Field(
        2,
        ge=0,
        le=1000,
        description="Reasoning, agent loops: trajectories per iteration logged as MLflow "
        "traces (one span per turn and per tool call; the run's Traces tab); 0 = none.",
    )
    registered_model_name: str | None = Field(
        "rlpipe-{task}",
        description="Register the final policy in the MLflow model registry under this name "
        "({task}: '<task>-<model type>' as in the default experiment name; {preset} and "
        "{run_name} are filled in too), with aliases 'newest' and 'best' (highest evaluation "
        "under the same evaluation protocol); None or '' = do not register.",
    )
    register_checkpoint: Literal["best", "latest"] = Field(
        "best",
        description="Which checkpoint a finished run registers: best (of its best evaluation, "
        "kept by run.checkpoint_best; the latest when the run has no evaluation) or latest.",
    )
    promotion: Literal["on_register", "gated"] = Field(
        "on_register",
        description="Who moves the 'best' alias. on_register: registration does, when the "
        "new version's score beats best's; gated: registration only moves 'newest', and the "
        "promote flow (rlpipe promote) re-evaluates newest against best on the held-out "
        "protocol and moves 'best' after approval (docs/promotion.md); an online run also "
        "serves each new version as an A/B candidate until rlpipe promote-served promotes it "
        "(docs/online.md).",
    )
    promotion_auto_approve: bool = Field(
        False,
        description="promote: move 'best' as soon as newest wins, without pausing for "
        "approval in the Prefect UI.",
    )
    promotion_min_improvement: float = Field(
        0.0,
        ge=0.0,
        allow_inf_nan=False,
        description="promote: newest wins only when its score exceeds best's by more than "
        "this (in the score metric's units, e.g. mean return).",
    )
    promotion_approval_timeout: float = Field(
        3600.0,
        gt=0.0,
        allow_inf_nan=False,
        description="promote: seconds the paused flow run waits for approval in the Prefect "
        "UI; then it fails and 'best' stays.",
    )
    artifact_location: str | None = Field(
        None,
        min_length=1,
        description="Artifact root of the experiment when rlpipe creates it (e.g. "
        "s3://bucket/mlflow; endpoint from MLFLOW_S3_ENDPOINT_URL). None: "
        "<output_dir>/mlartifacts. An existing experiment keeps its own.",
    )

    @field_validator("artifact_location")
    @classmethod
    def _artifact_location_valid(cls, value: str | None) -> str | None:
        return check_storage_uri(value, None)

    @field_validator("registered_model_name")
    @classmethod
    def _model_name_template(cls, value: str | None) -> str | None:
        if value:
            try:
                name = value.format(task="t", preset="p", run_name="r")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"only {{task}}, {{preset}}, {{run_name}} are filled in: {exc!r}"
                ) from None
            if "/" in name or ":" in name:
                raise ValueError("MLflow model names cannot contain '/' or ':'")
        return value


#: A duration in seconds: positive and finite.
Seconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]

_ON_EXPIRY = (
    ". On expiry the workers that have not answered are killed (SIGKILL) and the step fails "
    "with StepTimeout; the iteration's retry respawns them."
)


class TimeoutsConfig(Section):
    """Deadlines of pipeline steps and heartbeat liveness of workers (seconds)."""

    weight_sync: Seconds = Field(
        300.0, description="Deadline of a weight sync (trainer to rollout workers)" + _ON_EXPIRY
    )
    rollout: Seconds = Field(
        1800.0, description="Deadline of a rollout (env interaction or generation)" + _ON_EXPIRY
    )
    reward: Seconds = Field(600.0, description="Deadline of reward scoring" + _ON_EXPIRY)
    advantage: Seconds = Field(
        300.0, description="Deadline of the advantage computation" + _ON_EXPIRY
    )
    update: Seconds = Field(1800.0, description="Deadline of a policy update" + _ON_EXPIRY)
    evaluate: Seconds = Field(1800.0, description="Deadline of an evaluation" + _ON_EXPIRY)
    checkpoint: Seconds = Field(
        900.0, description="Deadline of saving or loading a checkpoint" + _ON_EXPIRY
    )
    worker_start: Seconds = Field(
        600.0,
        description="Time a worker may take to start (waiting for free CPUs included); on "
        "expiry the run stops with WorkerStartError naming the group and rank.",
    )
    heartbeat_interval_s: Seconds = Field(
        5.0,
        description="While a step waits on its workers, how often it sends each busy worker a "
        "heartbeat (answered on a control thread, also while the worker computes).",
    )
    heartbeat_timeout_s: Seconds = Field(
        30.0,
        description="A worker that does not answer a heartbeat within this is declared dead: "
        "during a step it is killed and the step fails with StepTimeout; a repair respawns "
        "it. A worker whose process died is reported at once. At least heartbeat_interval_s.",
    )

    @model_validator(mode="after")
    def _heartbeat_timeout_covers_interval(self) -> TimeoutsConfig:
        if self.heartbeat_timeout_s < self.heartbeat_interval_s:
            raise ValueError(
                f"timeouts.heartbeat_timeout_s ({self.heartbeat_timeout_s:g}) must be at least "
                f"timeouts.heartbeat_interval_s ({self.heartbeat_interval_s:g})"
            )
        return self
