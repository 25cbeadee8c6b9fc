"""The hybrid engine of a control-policy run: trainer and rollout policy in one process.

With collocated placement (rollout and trainer on the same CPUs/GPUs) the rollout copy of
the policy lives in the trainer's process: a weight sync is an in-memory copy of the
trainer's tensors (no serialization, no object store), and env workers send their
``predict`` calls to the trainer. Sampling streams and seeds are those a separate
:class:`~infra.workers.rollout_worker.RolloutWorker` of the same rank would use, so both
placements learn the same weights from the same seed.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from infra.workers.actor_worker import ActorWorker
from infra.workers.base import Stopwatch, step_method
from infra.workers.rollout_policy import RolloutPolicy
from rl_core.seeding import worker_seed


class HybridActorWorker(ActorWorker):
    """An :class:`ActorWorker` that also serves rollout inference (collocated placement)."""

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus, spaces)
        # a deep copy draws no random numbers: the trainer's RNG stays where it would be
        self.sampling = RolloutPolicy(
            copy.deepcopy(self.policy), worker_seed(self.cfg.run.seed, "rollout", rank)
        )

    @step_method
    def sync_rollout_weights(self) -> dict[str, Any]:
        """Copy the trainer's weights into the rollout copy (in memory).

        Returns:
            ``{"version", "bytes", "seconds"}``; ``bytes`` is 0: nothing leaves the process.
        """
        watch = Stopwatch()
        version = self.sampling.load_state_dict(self.policy.state_dict(), self.version)
        return {"version": version, "bytes": 0, "seconds": watch.elapsed()}

    def predict(
        self, env_obs: dict[str, Any], mode: str = "train", caller: int = 0
    ) -> tuple[Any, dict[str, Any]]:
        """Actions and training extras from the rollout copy (see ``RolloutWorker.predict``)."""
        return self.sampling.predict(env_obs, mode, caller)

    def get_version(self) -> int:
        """Weight version of the rollout copy (-1 before the first sync)."""
        return self.sampling.version

    def get_rng_state(self) -> dict[int, torch.Tensor]:
        """Sampling RNG states per caller (checkpointed)."""
        return self.sampling.get_rng_state()

    def set_rng_state(self, state: dict[int, torch.Tensor]) -> None:
        """Restore the sampling RNG states."""
        self.sampling.set_rng_state(state)

    def snapshot_rollout(self) -> None:
        """Keep the sampling streams' state (before a rollout)."""
        self.sampling.snapshot()

    def restore_rollout(self) -> None:
        """Put back the sampling streams kept by :meth:`snapshot_rollout`."""
        self.sampling.restore()
