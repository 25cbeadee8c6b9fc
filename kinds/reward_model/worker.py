"""The reward-model trainer rank: Bradley-Terry steps and scoring of preference pairs.

Backend (FSDP2), optimizer, checkpoints and snapshots are those of every language-model
trainer (:class:`~infra.llm.workers.trainer_rank.TrainerRank`); batches arrive as
dicts of numpy arrays (:data:`~rl_core.training.reward_update.PAIR_KEYS`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infra.cluster.dispatch import DEFAULT, UPDATE_METRICS, Reduce, Split, worker_method
from infra.cluster.worker_base import Stopwatch, step_method
from infra.llm.workers.trainer_rank import TrainerRank, tensors
from rl_core.training.reward_update import reward_model_update, score_pairs


class RewardModelWorker(TrainerRank):
    """One rank of the reward-model trainer.

    Args:
        config: Resolved config (dict).
        rank: Trainer rank.
        cpus: CPUs to pin to.
        world_size: Number of trainer ranks.
    """

    @worker_method(split=Split.REPLICA_ROWS, reduce=UPDATE_METRICS)
    @step_method
    def train_steps(
        self, shards: list[dict[str, np.ndarray]], total_pairs: int, iteration: int
    ) -> dict[str, float]:
        """One optimizer step per shard (this rank's part of each step's pairs).

        Returns:
            The steps' mean metrics (``train/skipped_updates`` summed), this rank's share of
            them (they add up over ranks), with the learning rate (``train/lr``) and
            ``seconds``.
        """
        watch = Stopwatch()
        actor = self.cfg.actor
        lr = self._set_lr(iteration)
        self.policy.train()
        replicas = self.data_parallel_size
        steps = [
            reward_model_update(
                self.policy,
                self.optimizer,
                tensors(shard, self.device),
                total_pairs,
                actor.micro_batch_size,
                actor.max_grad_norm,
                replicas,
                guard=self.guard,
                iteration=iteration,
            )
            for shard in shards
        ]
        self.version += 1
        metrics = {k: sum(s[k] for s in steps) / len(steps) for k in steps[0]}
        metrics["train/skipped_updates"] = sum(s["train/skipped_updates"] for s in steps)
        return {**metrics, "train/lr": lr, "seconds": watch.elapsed()}

    @worker_method(split=Split.REPLICA_ROWS, reduce={DEFAULT: Reduce.CONCAT, "seconds": Reduce.MAX})
    @step_method
    def score(self, shard: dict[str, np.ndarray], parts: int) -> dict[str, Any]:
        """Rewards of this rank's pairs under the current weights (collective).

        Args:
            shard: This rank's pairs; every rank gets the same number of rows.
            parts: Forward passes (the same on every rank).

        Returns:
            ``chosen`` and ``rejected`` rewards (float32 arrays) and ``seconds``.
        """
        watch = Stopwatch()
        self.policy.eval()
        chosen, rejected = score_pairs(self.policy, tensors(shard, self.device), parts)
        return {
            "chosen": chosen.cpu().numpy(),
            "rejected": rejected.cpu().numpy(),
            "seconds": watch.elapsed(),
        }
