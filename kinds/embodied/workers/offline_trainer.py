"""OfflineActorWorker: the trainer of offline RL runs (IQL), which learn from a dataset alone.

The update step draws ``demos.steps_per_iteration`` minibatches of ``demos.batch_size``
transitions from the demonstration dataset (``demos.path``; ``demos.successful_only`` keeps
the successful episodes only) and runs one gradient step on each with the learner the
algorithm's spec names (:class:`~rl_core.training.iql_update.IQLLearner`). The dataset is
read once, at the first update, its rewards passed through the run's reward function
(``reward.reward_type``, ``reward.scale``), and kept on the trainer's device. The rows are
drawn with the learner's generator, which checkpoints and snapshots keep: a resumed run and
a retried update draw the same rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from infra.cluster.worker_base import Stopwatch, resolve, step_method
from kinds.embodied.workers.off_policy_trainer import OffPolicyActorWorker
from rl_core.data.demos import DemosError, demo_transitions
from rl_core.training.iql_update import dataset_tensors


class OfflineActorWorker(OffPolicyActorWorker):
    """Trains an ``mlp_iql``-style policy from the demonstration dataset; serves its weights."""

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus, spaces)
        resolved = resolve(spaces)
        self.obs_size = int(np.prod(resolved.observation_space.shape))
        self.action_size = int(np.prod(resolved.action_space.shape))
        self.dataset: dict[str, torch.Tensor] | None = None

    def _load_dataset(self) -> dict[str, torch.Tensor]:
        """The dataset's transitions with the run's rewards, on the trainer's device.

        Raises:
            DemosError: The dataset is missing, malformed, or from an env of another
                observation or action size.
        """
        folder = self.cfg.demos_path()
        transitions = demo_transitions(folder, self.cfg.demos.successful_only)
        states, actions = transitions["states"], transitions["actions"]
        if states.shape[1] != self.obs_size or actions.shape[1] != self.action_size:
            raise DemosError(
                f"the demonstration dataset at {folder} has observations of size "
                f"{states.shape[1]} and actions of size {actions.shape[1]}; this env gives "
                f"{self.obs_size} and {self.action_size}: the data is from another env"
            )
        rewards = self.reward_fn(rewards=transitions["rewards"], scale=self.cfg.reward.scale)
        transitions["rewards"] = np.asarray(rewards, dtype=np.float32)
        return dataset_tensors(transitions, self.device)

    @step_method
    def update(self, iteration: int, sample: dict[str, Any] | None = None) -> dict[str, float]:
        """``demos.steps_per_iteration`` gradient steps on minibatches of the dataset.

        Args:
            iteration: The iteration (0-based): sets the learning rates under
                ``actor.lr_schedule`` and ``actor.warmup_iterations``.
            sample: Unused (the trainer draws its own rows).

        Returns:
            The learner's metrics, ``train/lr``, and ``samples``: the rows trained on.
        """
        watch = Stopwatch()
        if self.dataset is None:
            self.dataset = self._load_dataset()
        demos = self.cfg.demos
        lr = self.learner.set_learning_rates(iteration, self.cfg.run.max_iterations)
        minibatches = self.learner.draw_minibatches(
            self.dataset, demos.steps_per_iteration, demos.batch_size
        )
        metrics = self.learner.update(minibatches)
        self.version += 1
        samples = float(demos.batch_size * demos.steps_per_iteration)
        return {"seconds": watch.elapsed(), "train/lr": lr, "samples": samples, **metrics}
