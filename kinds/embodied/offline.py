"""OfflineRuntime: the embodied runtime of offline RL (IQL), trained from a dataset alone.

An iteration plays no env step: ``weight_sync``, ``rollout``, ``reward`` and ``advantage``
have nothing to do and return at once (the iteration keeps the steps, retries and metrics of
every run), and ``update`` runs ``demos.steps_per_iteration`` gradient steps on minibatches
of ``demos.batch_size`` transitions that the trainer draws from the demonstration dataset
(:class:`~kinds.embodied.workers.offline_trainer.OfflineActorWorker`). The rows trained on
count as the iteration's samples (``env/total_steps``), as in behaviour cloning.
Evaluation episodes (``eval/*``), videos and checkpoints are those of every embodied run;
the env workers only report the spaces the policy is built for.
"""

from __future__ import annotations

import time
from typing import Any

from infra.driver.faults import FIRST_FANOUT_JOB
from infra.driver.step_runtime import StepResult
from kinds.embodied.runtime import EmbodiedRuntime
from kinds.embodied.workers.hybrid_worker import HybridOfflineActorWorker
from kinds.embodied.workers.offline_trainer import OfflineActorWorker
from rl_core.steps import Step


class OfflineRuntime(EmbodiedRuntime):
    """Env workers (for the spaces) and a trainer that learns from the dataset."""

    trainer_worker = OfflineActorWorker
    hybrid_trainer_worker = HybridOfflineActorWorker

    def fault_target(self, step: Step) -> Any:
        """Where a fault planned at ``step`` strikes.

        The trainer for the update and the checkpoint, the first evaluation task for the
        evaluation; None for the steps that do nothing (a fault planned there never fires).
        """
        if step is Step.EVALUATE:
            return FIRST_FANOUT_JOB
        if step in (Step.UPDATE, Step.CHECKPOINT):
            return self.actor[0]
        return None

    def weight_sync(self, iteration: int) -> StepResult:
        """Nothing: no rollout policy acts (evaluation reads the trainer's weights)."""
        return StepResult(0.0)

    def rollout(self, iteration: int) -> StepResult:
        """Nothing: the data is the dataset."""
        return StepResult(0.0)

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Nothing: the trainer applies the reward function to the dataset when it reads it."""
        return StepResult(0.0)

    def advantage(self, iteration: int) -> StepResult:
        """Nothing: the learner forms its targets per minibatch."""
        return StepResult(0.0)

    def update(self, iteration: int) -> StepResult:
        """Gradient steps on minibatches of the dataset; their rows count as samples."""
        start = time.perf_counter()
        (metrics,) = self.actor.update(iteration, within=("update", self.timeouts.update))
        samples = int(metrics.pop("samples"))
        return StepResult.of(time.perf_counter() - start, metrics, env_steps=samples)

    def snapshot(self, step: str) -> None:
        """The trainer's state before an update (a rollout changes nothing)."""
        if step != Step.ROLLOUT:
            super().snapshot(step)

    def restore(self, step: str) -> None:
        """Put back what :meth:`snapshot` kept."""
        if step != Step.ROLLOUT:
            super().restore(step)
