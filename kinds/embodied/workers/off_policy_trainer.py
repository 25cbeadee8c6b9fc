"""OffPolicyActorWorker: the trainer of SAC, CrossQ and RLPD runs.

An iteration's batch arrives from the env workers like a PPO batch; the reward step applies
the reward function, the advantage step turns the batch into transitions for the replay
buffer worker, and the update step runs ``round(algorithm.off_policy.utd_ratio * env
steps)`` gradient steps on minibatches the replay worker drew (the learner the algorithm's
spec names, :mod:`rl_core.training.off_policy_learners`:
:class:`~rl_core.training.sac_update.SACLearner`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from infra.checkpoint.init_from import start_from_init_weights
from infra.cluster.worker_base import Stopwatch, WorkerBase, resolve, step_method
from kinds.embodied.workers.actor_worker import ActorWorker
from rl_core.algorithms.actor_critic_family import actor_critic_spec
from rl_core.data.replay_buffer import transitions_from_batch
from rl_core.models import get_model
from rl_core.rewards import build_reward
from rl_core.seeding import worker_seed
from rl_core.training.off_policy_learners import build_learner
from rl_core.training.sac_update import minibatches_from_arrays


class OffPolicyActorWorker(ActorWorker):
    """Trains an ``mlp_sac``-style policy from replay minibatches; serves its weights."""

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        WorkerBase.__init__(self, config, rank, cpus)  # not ActorWorker's PPO optimizer
        seed = worker_seed(self.cfg.run.seed, "actor", rank)
        torch.manual_seed(seed)  # model init is reproducible from the run seed
        # built on the CPU (the same initial weights on any device), then moved: the
        # learner's optimizers, target critics and temperature are made on the device
        self.policy = get_model(self.cfg.model, resolve(spaces)).to(self.device)
        start_from_init_weights(self.policy, self.cfg.model)  # run.init_from
        spec = actor_critic_spec(self.cfg.algorithm.loss_type)
        if spec is None:
            raise ValueError(f"{self.cfg.algorithm.loss_type!r} is not an off-policy algorithm")
        self.learner = build_learner(self.policy, spec, self.cfg.algorithm, self.cfg.actor, seed)
        self.reward_fn = build_reward(self.cfg.reward)
        self.version = 0
        self.batch: dict[str, Any] | None = None

    # -- training steps ------------------------------------------------------------------
    @step_method
    def transitions(self) -> dict[str, np.ndarray]:
        """The current batch (rewards applied) as transitions for the replay buffer."""
        return transitions_from_batch(self._require_batch())

    @step_method
    def update(self, iteration: int, sample: dict[str, Any] | None = None) -> dict[str, float]:
        """Gradient steps on the replay worker's minibatches (Ray resolves ``sample``).

        Args:
            iteration: The iteration (0-based): sets the learning rates under
                ``actor.lr_schedule`` and ``actor.warmup_iterations``.
            sample: Stacked minibatches (``[count * replay.batch_size, ...]``), or None
                while the buffer is filling (no update, the weights stay as they are).
        """
        watch = Stopwatch()
        self.batch = None
        if sample is None:
            return {"seconds": watch.elapsed(), "train/gradient_steps": 0.0}
        lr = self.learner.set_learning_rates(iteration, self.cfg.run.max_iterations)
        count = sample["rewards"].shape[0] // self.cfg.replay.batch_size
        minibatches = minibatches_from_arrays(sample, count, self.device)
        metrics = self.learner.update(minibatches)
        self.version += 1
        return {"seconds": watch.elapsed(), "train/lr": lr, **metrics}

    def snapshot(self) -> None:
        """Keep model, learner state (optimizers, targets, temperature), version and batch."""
        self._snapshot = (
            copy.deepcopy(self.policy.state_dict()),
            copy.deepcopy(self.learner.state_dict()),
            self.version,
            self.batch,
        )

    def restore_snapshot(self) -> None:
        """Put back what :meth:`snapshot` kept (an update that failed midway is undone)."""
        model, learner, version, batch = self._snapshot
        self.policy.load_state_dict(model)
        self.learner.load_state_dict(copy.deepcopy(learner))
        self.version, self.batch = version, batch

    # -- checkpoints (ActorWorker writes the files) ---------------------------------------
    def optimizer_state(self) -> dict[str, Any]:
        """Optimizers, target critics, temperature, noise generator and update count."""
        return self.learner.state_dict()

    def trainer_state(self) -> dict[str, Any]:
        """The weight version."""
        return {"version": self.version}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`optimizer_state` returned."""
        self.learner.load_state_dict(state)

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`trainer_state` returned."""
        self.version = int(state["version"])
