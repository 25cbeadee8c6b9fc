"""ActorWorker: the trainer holding the policy, optimizer and the current batch."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import ray
import torch

from infra.checkpoint.init_from import start_from_init_weights
from infra.checkpoint.layout import (
    ACTOR_MODEL,
    ACTOR_OPTIMIZER,
    ACTOR_TRAINER_STATE,
    SAFETENSORS,
    TORCH,
    actor_file,
    read_file,
    write_file,
)
from infra.checkpoint.store import CheckpointError, open_store
from infra.cluster.worker_base import Stopwatch, WorkerBase, resolve, step_method
from infra.weight_sync import bucket_nbytes, state_dict_to_buckets
from kinds.embodied.config import EmbodiedConfig
from rl_core.data.batch import concat_batches, writable_tree
from rl_core.models import get_model
from rl_core.rewards import build_reward
from rl_core.seeding import worker_seed
from rl_core.training.behaviour_cloning import bc_step
from rl_core.training.nonfinite import (
    SkippedUpdateGuard,
    nonfinite_tensors,
    nonfinite_weights_message,
)
from rl_core.training.optim import build_optimizer, learning_rate, set_learning_rate
from rl_core.training.ppo import compute_advantages, ppo_update


class ActorWorker(WorkerBase[EmbodiedConfig]):
    """Trains the policy on rollout batches; serves weights to rollout workers.

    The policy and its optimizer live on the worker's device (``self.device``, the GPU Ray
    assigned it or the CPU); batches arrive as numpy and the updates move them there, while
    weights and checkpoints leave it as CPU arrays and tensors.
    """

    group = "actor"
    opens_checkpoint_store = True

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus)
        seed = worker_seed(self.cfg.run.seed, "actor", rank)
        torch.manual_seed(seed)  # model init is reproducible from the run seed
        # built on the CPU (the same initial weights on any device), then moved
        self.policy = get_model(self.cfg.model, resolve(spaces)).to(self.device)
        start_from_init_weights(self.policy, self.cfg.model)  # run.init_from
        actor = self.cfg.actor
        self.optimizer = build_optimizer(self.policy.parameters(), actor)
        # minibatch order is drawn on the CPU: the same on any device
        self.generator = torch.Generator().manual_seed(seed)
        self.reward_fn = build_reward(self.cfg.reward)
        self.guard = SkippedUpdateGuard(actor.max_skipped_updates_in_a_row)
        self.version = 0
        self.batch: dict[str, Any] | None = None
        self.demos: Any = None  # the demonstration dataset, read at the first BC step

    @step_method
    def sft_update(self, iteration: int) -> dict[str, float]:
        """Behaviour cloning: ``demos.steps_per_iteration`` steps on the demonstrations.

        Minibatches are drawn with the trainer's generator (saved in checkpoints), so a
        resumed run draws the same ones.
        """
        watch = Stopwatch()
        if self.demos is None:
            from rl_core.data.demos import load_demos

            self.demos = load_demos(self.cfg.demos_path(), self.cfg.demos.successful_only)
        actor, demos = self.cfg.actor, self.cfg.demos
        lr = learning_rate(actor, iteration, self.cfg.run.max_iterations)
        set_learning_rate(self.optimizer, lr)
        self.policy.train()
        steps = [
            bc_step(
                self.policy,
                self.optimizer,
                self.demos,
                demos.batch_size,
                self.generator,
                actor.max_grad_norm,
                self.guard,
                iteration,
                lr,
            )
            for _ in range(demos.steps_per_iteration)
        ]
        metrics = {k: float(np.mean([s[k] for s in steps])) for k in steps[0]}
        metrics["train/skipped_updates"] = float(sum(s["train/skipped_updates"] for s in steps))
        self.version += 1
        samples = float(demos.batch_size * demos.steps_per_iteration)
        return {"seconds": watch.elapsed(), "train/lr": lr, "samples": samples, **metrics}

    # -- training steps ------------------------------------------------------------------
    def receive_batch(self, *batches: dict[str, Any]) -> dict[str, float]:
        """Take the env workers' batches (Ray resolves the ObjectRefs passed as args)."""
        watch = Stopwatch()
        self.batch = writable_tree(concat_batches(list(batches)))
        return {"seconds": watch.elapsed(), "samples": float(self.batch["rewards"].size)}

    @step_method
    def apply_reward(self) -> dict[str, float]:
        """Apply the configured reward function to the batch's rewards."""
        watch = Stopwatch()
        batch = self._require_batch()
        # The env's rewards are kept, so applying the reward again (a retry) is idempotent.
        env_rewards = batch.setdefault("env_rewards", batch["rewards"])
        rewards = self.reward_fn(rewards=env_rewards, scale=self.cfg.reward.scale)
        rewards = np.asarray(rewards, dtype=np.float32)
        if rewards.shape != batch["rewards"].shape:
            raise ValueError(
                f"reward {self.cfg.reward.reward_type!r} returned shape {rewards.shape}; "
                f"expected {env_rewards.shape} (one reward per env step)"
            )
        batch["rewards"] = rewards
        return {"seconds": watch.elapsed(), "rollout/reward_mean": float(batch["rewards"].mean())}

    @step_method
    def compute_advantages(self) -> dict[str, float]:
        """Advantages and returns for the current batch."""
        watch = Stopwatch()
        metrics = compute_advantages(
            self.policy, self._require_batch(), self.cfg.algorithm, self.cfg.env.group_size
        )
        return {"seconds": watch.elapsed(), **metrics}

    @step_method
    def update(self, iteration: int) -> dict[str, float]:
        """One policy update on the current batch; bumps the weight version."""
        watch = Stopwatch()
        actor = self.cfg.actor
        lr = learning_rate(actor, iteration, self.cfg.run.max_iterations)
        set_learning_rate(self.optimizer, lr)
        self.policy.train()
        metrics = ppo_update(
            self.policy,
            self.optimizer,
            self._require_batch(),
            self.cfg.algorithm,
            actor,
            self.generator,
            guard=self.guard,
            iteration=iteration,
        )
        self.batch = None
        self.version += 1
        return {"seconds": watch.elapsed(), "train/lr": lr, **metrics}

    def snapshot(self) -> None:
        """Keep model, optimizer, sampling generator, version, batch and skip streak."""
        self._snapshot = (
            copy.deepcopy(self.policy.state_dict()),
            copy.deepcopy(self.optimizer.state_dict()),
            self.generator.get_state(),
            self.version,
            self.batch,
            self.guard.in_a_row,
        )

    def restore_snapshot(self) -> None:
        """Put back what :meth:`snapshot` kept (an update that failed midway is undone)."""
        model, optimizer, generator, version, batch, skipped_in_a_row = self._snapshot
        self.policy.load_state_dict(model)
        self.optimizer.load_state_dict(copy.deepcopy(optimizer))
        self.generator.set_state(generator)
        self.version, self.batch = version, batch
        self.guard.in_a_row = skipped_in_a_row

    def _require_batch(self) -> dict[str, Any]:
        if self.batch is None:
            raise RuntimeError("no rollout batch: run the rollout step before this one")
        return self.batch

    # -- weights -------------------------------------------------------------------------
    @step_method
    def get_weight_buckets(self, bucket_mb: float) -> dict[str, Any]:
        """Put the state dict in the object store as numpy buckets.

        Returns:
            ``{"version", "refs", "bytes", "seconds"}``; ``refs`` are ObjectRefs of buckets.
        """
        watch = Stopwatch()
        buckets = state_dict_to_buckets(self.policy.state_dict(), int(bucket_mb * 2**20))
        refs = [ray.put(b) for b in buckets]
        return {
            "version": self.version,
            "refs": refs,
            "bytes": bucket_nbytes(buckets),
            "seconds": watch.elapsed(),
        }

    def get_state_dict(self) -> dict[str, np.ndarray]:
        """The policy weights as numpy arrays."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.policy.state_dict().items()}

    # -- checkpoints ---------------------------------------------------------------------
    @step_method
    def save_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Write model, optimizer and RNG state under ``folder`` of the store.

        Raises:
            CheckpointError: A weight holds inf or NaN (nothing is written).
        """
        watch = Stopwatch()
        weights = self.policy.state_dict()
        bad = nonfinite_tensors(weights.items())
        if bad:
            raise CheckpointError(nonfinite_weights_message(bad, self.version))
        store = open_store(store_uri)
        write_file(store, folder, self._file(ACTOR_MODEL), SAFETENSORS, weights)
        write_file(store, folder, self._file(ACTOR_OPTIMIZER), TORCH, self.optimizer_state())
        write_file(store, folder, self._file(ACTOR_TRAINER_STATE), TORCH, self.trainer_state())
        return {"seconds": watch.elapsed()}

    def _file(self, name: str) -> str:
        """This rank's file ``name`` in a step folder."""
        return actor_file(self.rank, name)

    def optimizer_state(self) -> dict[str, Any]:
        """What ``optimizer.pt`` of a checkpoint holds."""
        return self.optimizer.state_dict()

    def trainer_state(self) -> dict[str, Any]:
        """What ``trainer_state.pt`` of a checkpoint holds (besides model and optimizer)."""
        return {
            "generator": self.generator.get_state(),
            "version": self.version,
            "skipped_updates_in_a_row": self.guard.in_a_row,
        }

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`optimizer_state` returned."""
        self.optimizer.load_state_dict(state)

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`trainer_state` returned."""
        self.generator.set_state(state["generator"])
        self.version = int(state["version"])
        self.guard.in_a_row = int(state.get("skipped_updates_in_a_row", 0))

    def load_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Restore what :meth:`save_checkpoint` wrote.

        The files hold CPU tensors: weights are copied into the policy's tensors and the
        optimizer casts its state to its parameters' device, so both land on
        ``self.device``.
        """
        store = open_store(store_uri)
        weights = read_file(store, folder, self._file(ACTOR_MODEL), SAFETENSORS)
        self.policy.load_state_dict(weights, strict=True)
        self.load_optimizer_state(read_file(store, folder, self._file(ACTOR_OPTIMIZER), TORCH))
        self.load_trainer_state(read_file(store, folder, self._file(ACTOR_TRAINER_STATE), TORCH))
        self.batch = None
        return {"version": self.version}
