"""The runtime of an online run: a reasoning runtime whose batches are served feedback.

Beside the trainer and rollout workers of a reasoning run it serves the policy (Ray Serve,
:mod:`kinds.online.deployment`) and takes each iteration's batch from the feedback store
(:class:`~kinds.online.feedback_generation.FeedbackGeneration`). At each weight sync the
trainer's weights are exported as a new served version (``<run dir>/served/v<version>``)
and the replicas swap it in. Evaluation (held-out accuracy) runs on the rollout workers as
in every reasoning run.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from infra.checkpoint.export import export_policy
from infra.driver.step_runtime import StepResult
from infra.processes import free_port
from kinds.online.config import OnlineConfig
from kinds.online.deployment import (
    REPLICA_CPUS,
    ServerSettings,
    Weights,
    start_policy_server,
)
from kinds.online.feedback_generation import FeedbackGeneration
from kinds.online.section import LOOPBACK_HOSTS
from kinds.online.served_versions import (
    ab_comparison,
    ab_metrics,
    current_weights,
    publish_version,
    served_dirs,
)
from kinds.online.service import token_digest
from kinds.online.simulated_user import SimulatedUser
from kinds.online.store import FeedbackStore
from kinds.online.store_mirror import StoreMirror, restore_store
from kinds.reasoning.runtime import ReasoningRuntime
from rl_core.llm.prompting import load_task_samples
from rl_core.models import get_model
from rl_core.online.simulated_user import QuestionPlan
from rl_core.steps import Step

logger = logging.getLogger(__name__)
SERVED_DIR = "served"
#: The weights file the replicas serve (in ``<run dir>/served``).
WEIGHTS_FILE = "current.json"


def newest_version(weights: Weights) -> int:
    """The newest version ``weights`` serves (the candidate when there is one)."""
    return weights.version if weights.candidate_version is None else weights.candidate_version


def server_settings(
    cfg: OnlineConfig, token: str | None, trainer: str, **trigger: Any
) -> ServerSettings:
    """The endpoint's settings for an online run's config.

    Args:
        cfg: The run's validated config.
        token: The bearer token (only its digest is kept), or None.
        trainer: Who trains on the feedback: ``run`` (the run serving it) or ``external``
            (runs with ``online.server=external``, e.g. started by the feedback-ready event).
        trigger: Parameters of the train flow run the event should start (its payload).
    """
    run_dir = Path(cfg.run.output_dir) / cfg.run.name
    return ServerSettings(
        model_name=cfg.online.model_name or cfg.run.name,
        store=str(store_path(cfg).resolve()),
        weights_file=str((run_dir / SERVED_DIR / WEIGHTS_FILE).resolve()),
        token_sha256=token_digest(token),
        max_new_tokens=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature,
        threshold=cfg.online.batch_size,
        resource_id=f"rlpipe.online.{cfg.run.name}",
        trainer=trainer,
        trigger=trigger,
        mirror=cfg.online.mirror,
    )


def open_feedback_store(cfg: OnlineConfig) -> FeedbackStore:
    """The run's feedback store, rebuilt from ``online.mirror`` first when its file is lost."""
    path, mirror = store_path(cfg), cfg.online.mirror
    if mirror is None:
        return FeedbackStore(path)
    restore_store(path, mirror)
    return FeedbackStore(path, StoreMirror(mirror))


def store_path(cfg: OnlineConfig) -> Path:
    """The feedback database of an online run."""
    if cfg.online.store:
        return Path(cfg.online.store)
    return Path(cfg.run.output_dir) / cfg.run.name / "feedback.db"


class OnlineRuntime(ReasoningRuntime):
    """Serves the policy, trains on its feedback.

    Args:
        cfg: The validated config of a reasoning run with ``online.enabled``.
    """

    cfg: OnlineConfig

    @classmethod
    def preflight(cls, cfg: OnlineConfig) -> None:
        """The reasoning checks, and no endpoint beyond loopback without a token."""
        super().preflight(cfg)
        online = cfg.online
        if online.host not in LOOPBACK_HOSTS and not os.environ.get(online.token_env):
            raise ValueError(
                f"online.host = {online.host!r} serves beyond this machine: set the bearer "
                f"token in ${online.token_env} (online.token_env) or bind 127.0.0.1"
            )

    @classmethod
    def cpus_outside_groups(cls, cfg: OnlineConfig) -> float:
        """The policy server's replica, when the run serves its policy itself."""
        return REPLICA_CPUS if cfg.online.server == "run" else 0.0

    def _choose_generation(self) -> FeedbackGeneration:
        cfg = self.cfg
        online = cfg.online
        self.run_dir = Path(cfg.run.output_dir) / cfg.run.name
        self.feedback_store = open_feedback_store(cfg)
        token = os.environ.get(online.token_env) or None
        self.server_settings = server_settings(cfg, token, trainer="run")
        self._export_model = get_model(cfg.model, None)
        #: The newest version published (main, or the candidate under gated promotion).
        self.served_version: int | None = None
        #: Share of requests a new version gets as the candidate (None: it replaces main).
        self.candidate_share = online.candidate_share if cfg.tracking.promotion == "gated" else None
        self.url: str | None = None
        if online.server == "external":
            self._note_served()
            logger.info(
                "training %s on the feedback in %s; new versions go to %s",
                cfg.run.name,
                self.server_settings.store,
                self.server_settings.weights_file,
            )
            return FeedbackGeneration(self.feedback_store, cfg.run.name, online, None)
        weights = current_weights(self.server_settings.weights_file)
        if self.candidate_share is None or weights is None:  # (gated: main stays promoted)
            first = self._export(self.published_version).resolve()
            weights = Weights(self.published_version, str(first))
        port = online.port or free_port()
        self.url = start_policy_server(self.server_settings, weights, online.host, port)
        self.served_version = newest_version(weights)
        logger.info("serving %s at %s/v1", self.server_settings.model_name, self.url)
        user = None
        if online.user.enabled:
            train, _ = load_task_samples(cfg.data)
            plan = QuestionPlan(train, online.user.noise, cfg.run.seed)
            user = SimulatedUser(self.url, plan, token=token, model=self.server_settings.model_name)
        return FeedbackGeneration(self.feedback_store, cfg.run.name, online, user)

    @property
    def external(self) -> bool:
        """Whether an endpoint started apart (``rlpipe serve``) serves this run."""
        return self.cfg.online.server == "external"

    def _note_served(self) -> None:
        """What the external endpoint serves now (its weights file), if anything."""
        current = current_weights(self.server_settings.weights_file)
        if current is not None:
            self.served_version = newest_version(current)

    def idle_reason(self, iteration: int) -> str | None:
        """``idle`` when an externally served run has no full batch of feedback waiting.

        Such a run trains the batches that are there and stops; the next feedback-ready
        event starts it again. (A batch this iteration claimed before is always there.)
        """
        if not self.external:
            return None
        if self.feedback_store.claimed(self.cfg.run.name, iteration):
            return None
        if self.feedback_store.pending() >= self.cfg.online.batch_size:
            return None
        return "idle"

    def _export(self, version: int) -> Path:
        """The trainer's weights as served version ``version`` (a model directory)."""
        state = next(
            s
            for s in self.actor.full_state(within=("weight_sync", self.timeouts.weight_sync))
            if s is not None
        )
        self._export_model.load_state_dict(
            {k: torch.from_numpy(np.asarray(v)) for k, v in state.items()}, strict=True
        )
        out = self.run_dir / SERVED_DIR / f"v{version:06d}"
        export_policy(
            self._export_model,
            self.config_dict["model"],
            None,
            out,
            source={"run_name": self.cfg.run.name, "weight_version": version},
            overwrite=True,
        )
        # keep the new version and those replicas serve until they load the next weights file
        keep = {out.resolve(), *served_dirs(current_weights(self.server_settings.weights_file))}
        for old in (self.run_dir / SERVED_DIR).glob("v*"):
            if old.resolve() not in keep:
                shutil.rmtree(old, ignore_errors=True)
        return out

    def weight_sync(self, iteration: int) -> StepResult:
        """Trainer → rollout engines, then → the served policy (a new version).

        An external endpoint gets new versions at checkpoints instead (only committed
        weights: the next start resumes from them).
        """
        result = super().weight_sync(iteration)
        if self.external or self.served_version == self.published_version:
            return result
        seconds = self._publish(self.published_version)
        metrics = {**result.metrics, "online/serve_sync_seconds": seconds}
        return StepResult(result.seconds + seconds, metrics, info=result.info)

    def after_checkpoint_saved(self, results: dict[str, list[Any]]) -> None:
        """An external endpoint then serves the checkpoint's weights (a new version)."""
        saved = results[self.actor.name]
        version = next(
            (r["version"] for r in saved if isinstance(r, dict) and "version" in r), None
        )
        if self.external and version is not None and version != self.served_version:
            self._publish(version)
            logger.info("published weight version %d to %s", version, self.cfg.run.name)

    def _publish(self, version: int) -> float:
        """Export the trainer's weights as ``version`` and serve them; the seconds taken.

        The new version replaces main, or, under gated promotion, becomes the A/B candidate.
        """
        start = time.perf_counter()
        folder = self._export(version)
        weights_file = self.server_settings.weights_file
        publish_version(weights_file, version, str(folder.resolve()), self.candidate_share)
        self.served_version = version
        return time.perf_counter() - start

    def rollout(self, iteration: int) -> StepResult:
        """The batch of feedback.

        Under gated promotion also each served version's acceptance so far (``online/ab_*``).
        """
        result = super().rollout(iteration)
        if self.candidate_share is None:
            return result
        comparison = ab_comparison(self.feedback_store, self.server_settings.weights_file)
        result.metrics.update(ab_metrics(comparison))
        return result

    def fault_target(self, step: Step) -> Any:
        """As a reasoning run's, but ``reward`` calls no worker (faults there never fire)."""
        return None if step is Step.REWARD else super().fault_target(step)

    def reward_jobs(self, iteration: int) -> list[Any]:
        """None: the feedback is the reward (scored when the batch was taken)."""
        return []

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Nothing to score: the batch's scores are its feedback rewards minus the baseline.

        ``rollout/reward_mean`` is the mean feedback reward (before the baseline).
        """
        rewards = self.generation.rewards
        return StepResult.of(0.0, {"rollout/reward_mean": float(np.mean(rewards))})

    def after_checkpoint_loaded(self, step: int) -> None:
        """The next weight sync serves the restored weights."""
        super().after_checkpoint_loaded(step)
        if not self.external:  # (an external endpoint serves committed versions only)
            self.served_version = None

    def shutdown(self) -> None:
        """Stop serving, then every worker."""
        from ray import serve

        if not self.external:
            try:
                serve.shutdown()
            except Exception as exc:  # noqa: BLE001 - shutting down: report, go on
                logger.warning("stopping the policy server: %s", exc)
        self.feedback_store.close()
        if self.generation.user is not None:
            self.generation.user.close()
        super().shutdown()
