"""The step contract: what every kind of training (a model category) implements.

A run's driver holds one :class:`StepRuntime`. The iteration flow calls its steps in order
(weight_sync → rollout → reward → advantage → update, then evaluate and checkpoint when
due); each returns a :class:`StepResult` (worker seconds, MLflow metrics, env steps,
control data kept apart from the metrics), while tensors stay in Ray. Stateless fan-out work (reward scoring, evaluation episodes, a video) is
returned as :class:`FanoutJob` lists that the tasks layer runs as parallel Prefect tasks on
the Ray cluster. A kind of training names its runtime class in its
:class:`~rl_core.kind.Kind`; nothing else in rlpipe branches on the kind.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from infra.checkpoint.parts import CheckpointPart, load_parts, save_parts
from infra.checkpoint.store import step_dir_name
from infra.driver.faults import FIRST_FANOUT_JOB, FaultInjector
from rl_core.config import RLPipeConfig
from rl_core.kind import kind_of
from rl_core.steps import Step

#: Steps whose work is one call of a runtime method of another name than the step's.
STEP_METHODS: dict[Step, str] = {Step.SFT_UPDATE: "sft_step"}


@dataclass
class FanoutJob:
    """Stateless work for one Ray task: ``fn(**kwargs)``.

    Attributes:
        name: Task name shown in the Prefect UI (``<name>-<iteration>-<part>``).
        fn: A module-level function (importable in Ray workers).
        kwargs: Its keyword arguments (ObjectRefs are resolved by Ray).
        fault: An injected fault for this job (``RLPIPE_FAULTS``), else None.
    """

    name: str
    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    fault: dict[str, str] | None = None


def split_metrics(values: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """Split ``values`` into MLflow metrics and the rest.

    Metrics are the numbers (not booleans) under a ``section/name`` key; everything else
    (versions, folders, lists...) is control data.
    """
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {}
    for key, value in values.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if "/" in key and number:
            metrics[key] = float(value)
        else:
            info[key] = value
    return metrics, info


@dataclass
class StepResult:
    """What one step of an iteration reports to the flow.

    Attributes:
        seconds: Worker time of the step (MLflow ``time/<step>``; adds up to
            ``time/compute``).
        metrics: MLflow metrics of the step, ``section/name`` → number.
        env_steps: Samples the step collected (the rollout step; counted once per iteration
            into ``env/total_steps``).
        info: Control data that is not logged (weight versions, a checkpoint folder...).
    """

    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    env_steps: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, seconds: float, values: Mapping[str, Any], env_steps: int = 0) -> StepResult:
        """A result with metrics and control data split from ``values``.

        See :func:`split_metrics`; a ``seconds`` key in ``values`` is dropped.
        """
        metrics, info = split_metrics({k: v for k, v in values.items() if k != "seconds"})
        return cls(float(seconds), metrics, int(env_steps), info)


@dataclass
class Evaluation:
    """Result of an evaluation.

    Attributes:
        metrics: ``eval/*`` metrics; ``eval/return_mean`` is required (it ranks
            checkpoints and feeds ``run.stop_at_eval_return``).
        rows: Sample rows logged to MLflow as a table.
        seconds: Worker time of the evaluation.
    """

    metrics: dict[str, float]
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


#: The config class of a runtime's kind.
C = TypeVar("C", bound=RLPipeConfig)


class StepRuntime(ABC, Generic[C]):
    """Worker groups of one run and the steps the iteration flow calls on them.

    Generic in the kind's config class (``StepRuntime[ReasoningConfig]``), so ``self.cfg``
    has the kind's sections. Subclasses build their worker groups in ``__init__(cfg)`` and
    implement the abstract methods; the kind (:class:`~rl_core.kind.Kind`) that names the subclass gives its
    score metric.
    """

    #: Env spaces the model was built for (None for models that take none).
    spaces: Any = None

    def __init__(self, cfg: C) -> None:
        self.cfg: C = cfg
        self.config_dict = cfg.model_dump(mode="json")
        self.faults = FaultInjector()

    @property
    def score_metric(self) -> str:
        """The metric that ranks checkpoints and registered versions (the kind's)."""
        return kind_of(self.cfg).score_metric

    # -- checks before anything starts -----------------------------------------------------
    @classmethod
    def preflight(cls, cfg: RLPipeConfig) -> None:  # noqa: B027 - optional hook
        """Read and check inputs (data files, engines) before any server or worker starts."""
        return None

    @classmethod
    def prestart(cls, cfg: RLPipeConfig) -> None:  # noqa: B027 - optional hook
        """Start what the first steps need from Ray besides the worker groups (idempotent).

        Called as soon as Ray is connected (e.g. task workers for the fan-out warm up while
        the CLI imports), and again by the runtime itself.
        """
        return None

    # -- where injected faults strike ---------------------------------------------------
    def fault_target(self, step: Step) -> Any:
        """Where a worker fault (``RLPIPE_FAULTS``) planned at ``step`` strikes.

        Args:
            step: A step that takes faults.

        Returns:
            The worker (an actor handle) that does the step: armed, it fires the fault when
            its next step method starts; :data:`~infra.driver.faults.FIRST_FANOUT_JOB`: the
            step's first fan-out job carries it; None: the step calls no worker (a fault
            planned there never fires). None by default.
        """
        return None

    def arm_fault(self, step: Step, iteration: int) -> dict[str, str] | None:
        """Hand the worker fault planned at ``step`` of ``iteration`` to its target, if any.

        The step machinery calls this once per attempt of a step, before the step's work
        starts (:meth:`run_step`, :meth:`fanout_jobs`, :meth:`checkpoint_step`); a fault
        fires on the first attempt only.

        Returns:
            The fault for the step's first fan-out job (with its one-shot token) when the
            target is :data:`~infra.driver.faults.FIRST_FANOUT_JOB`, else None.
        """
        step = Step(step)
        if not self.faults.plan or not step.takes_faults:
            return None
        target = self.fault_target(step)
        if target is None:
            return None
        if target is FIRST_FANOUT_JOB:
            return self.faults.task_fault(step, iteration)
        self.faults.arm(step, iteration, target)
        return None

    def run_step(self, step: Step, iteration: int) -> StepResult:
        """Run a step that is one call of this runtime, its injected fault armed first.

        Args:
            step: ``weight_sync``, ``rollout``, ``advantage``, ``update`` or ``sft_update``
                (the method of the same name, ``sft_step`` for ``sft_update``).
            iteration: Iteration index.
        """
        step = Step(step)
        self.arm_fault(step, iteration)
        return getattr(self, STEP_METHODS.get(step, step.value))(iteration)

    def fanout_jobs(self, step: Step, iteration: int) -> list[FanoutJob]:
        """The fan-out jobs of ``reward`` or ``evaluate``, then the step's fault armed.

        A fault whose target is the first fan-out job goes on the first job (whose task
        then runs on a Ray worker, see ``tasks/reward.py``).
        """
        step = Step(step)
        jobs = (
            self.reward_jobs(iteration) if step is Step.REWARD else self.evaluation_jobs(iteration)
        )
        fault = self.arm_fault(step, iteration)
        if fault is not None and jobs:
            jobs[0].fault = fault
        return jobs

    def checkpoint_step(self, store_uri: str, step: int) -> dict[str, Any]:
        """The checkpoint step: its fault armed (that of iteration ``step - 1``), then saved.

        See :meth:`save_checkpoint`.
        """
        self.arm_fault(Step.CHECKPOINT, step - 1)
        return self.save_checkpoint(store_uri, step)

    # -- the steps of an iteration --------------------------------------------------------
    @abstractmethod
    def weight_sync(self, iteration: int) -> StepResult:
        """Push the trainer's weights to the rollout workers."""

    def idle_reason(self, iteration: int) -> str | None:
        """Why there is nothing to train at ``iteration`` now (None: train it).

        The run then commits its checkpoint and stops with this reason; rerunning the same
        command continues. Runs that train on a fixed schedule are never idle.
        """
        return None

    @abstractmethod
    def rollout(self, iteration: int) -> StepResult:
        """Collect experience; the result's ``env_steps`` are the samples collected."""

    def reward_jobs(self, iteration: int) -> list[FanoutJob]:
        """Scoring jobs to fan out before :meth:`reward` (none by default)."""
        return []

    @abstractmethod
    def reward(self, iteration: int, results: list[Any] | None) -> StepResult:
        """Apply rewards (``results``: the outputs of :meth:`reward_jobs`' tasks)."""

    @abstractmethod
    def advantage(self, iteration: int) -> StepResult:
        """Compute advantages (and returns)."""

    @abstractmethod
    def update(self, iteration: int) -> StepResult:
        """Update the policy once."""

    # -- evaluation ----------------------------------------------------------------------
    def evaluation_jobs(self, iteration: int) -> list[FanoutJob]:
        """Evaluation work to fan out before :meth:`evaluate` (none by default)."""
        return []

    @abstractmethod
    def evaluate(self, iteration: int, results: list[Any] | None) -> Evaluation:
        """Evaluation metrics (``results``: the outputs of :meth:`evaluation_jobs`' tasks)."""

    def video_job(self, iteration: int) -> FanoutJob | None:
        """A job rendering one evaluation episode to a GIF, if this category has videos."""
        return None

    @classmethod
    @abstractmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Evaluate a committed checkpoint in this process (``evaluate-latest``).

        ``checkpoint`` is what the evaluate flow read: ``config``, ``weights``, ``manifest``,
        ``step`` and ``trusted`` (``--trust-checkpoint``: pass it on to ``locate_checkpoint``
        when reading more of the checkpoint).

        Returns:
            ``(metrics, sample rows, one-line headline)``.
        """

    # -- state ---------------------------------------------------------------------------
    @abstractmethod
    def checkpoint_parts(self) -> list[CheckpointPart]:
        """What a checkpoint of this run holds, as declared parts (saved in this order).

        :class:`~infra.checkpoint.layout.StatePart`: state the driver writes as one file
        (a prompt cursor, env states gathered from workers); :class:`~infra.checkpoint.
        parts.WorkerPart`: a worker group whose ranks write their own files (trainer
        weights). :mod:`infra.checkpoint.parts` says how they are walked.
        """

    def save_checkpoint(self, store_uri: str, step: int) -> dict[str, Any]:
        """Write every part for ``step`` (the caller commits the manifest).

        The checkpoint's fault is armed by :meth:`checkpoint_step`, which calls this.

        Returns:
            ``seconds`` taken and the step folder (``dir``).
        """
        start = time.perf_counter()
        parts = self.checkpoint_parts()
        folder = step_dir_name(step)
        results = save_parts(store_uri, folder, parts, self.cfg.timeouts.checkpoint)
        self.after_checkpoint_saved(results)
        return {"seconds": time.perf_counter() - start, "dir": folder}

    def load_checkpoint(self, store_uri: str, folder: str, step: int) -> None:
        """Restore every part from a committed checkpoint folder.

        A file that is malformed or holds a pickle not signed with this user's key is
        refused before any worker loads anything (unless ``run.trust_checkpoint``).
        """
        parts = self.checkpoint_parts()
        timeout, trust = self.cfg.timeouts.checkpoint, self.cfg.run.trust_checkpoint
        load_parts(store_uri, folder, step, parts, timeout, trust)
        self.after_checkpoint_loaded(step)

    def after_checkpoint_saved(self, results: dict[str, list[Any]]) -> None:  # noqa: B027
        """Called after a checkpoint's parts are written.

        Args:
            results: The results of each worker part's ranks, by group name.
        """
        return None

    def after_checkpoint_loaded(self, step: int) -> None:  # noqa: B027 - optional hook
        """Called after every part was restored from the checkpoint of ``step``."""
        return None

    @abstractmethod
    def snapshot(self, step: str) -> None:
        """Keep in memory the state ``step`` will change (a stateful :class:`~rl_core.steps.Step`)."""

    @abstractmethod
    def restore(self, step: str) -> None:
        """Put back what :meth:`snapshot` kept, before ``step`` is tried again."""

    def before_retry(self, step: str) -> None:  # noqa: B027 - optional hook
        """Prepare a stateless step for another attempt (e.g. force a full weight sync)."""
        return None

    # -- workers -------------------------------------------------------------------------
    @abstractmethod
    def repair(self) -> dict[str, list[int]]:
        """Respawn dead workers; returns the rebuilt ranks per group (their state is lost)."""

    @property
    def groups(self) -> list[Any]:
        """The run's worker groups (none for a runtime that works in the driver)."""
        return []

    def worker_pids(self) -> dict[str, list[int]]:
        """Process ids per worker group (for tests and debugging)."""
        return {g.name: g.ping() for g in self.groups}

    def shutdown(self) -> None:
        """Stop every worker and give back the GPUs reserved for them."""
        for group in self.groups:
            group.shutdown()
        placement = getattr(self, "cluster_placement", None)
        if placement is not None:
            placement.release()
