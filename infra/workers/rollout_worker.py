"""RolloutWorker: policy inference for env workers, refreshed by weight sync."""

from __future__ import annotations

from typing import Any

import ray
import torch

from infra.weight_sync import buckets_to_state_dict
from infra.workers.base import WorkerBase
from infra.workers.rollout_policy import RolloutPolicy
from rl_core.models import get_model
from rl_core.seeding import worker_seed


class RolloutWorker(WorkerBase):
    """Holds a copy of the policy; answers ``predict`` calls from env workers."""

    group = "rollout"

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus)
        self.sampling = RolloutPolicy(
            get_model(self.cfg.model, spaces), worker_seed(self.cfg.run.seed, "rollout", rank)
        )

    def predict(
        self, env_obs: dict[str, Any], mode: str = "train", caller: int = 0
    ) -> tuple[Any, dict[str, Any]]:
        """Actions (env-ready numpy) and training extras for a batch of observations.

        Args:
            env_obs: Batched observations.
            mode: ``train`` (sample) or ``eval`` (deterministic).
            caller: Rank of the calling env worker (selects its sampling stream).
        """
        return self.sampling.predict(env_obs, mode, caller)

    def load_weights(self, bucket_refs: list[Any], version: int) -> int:
        """Replace the policy weights with those in ``bucket_refs``; returns the version."""
        return self.sampling.load_state_dict(buckets_to_state_dict(ray.get(bucket_refs)), version)

    def get_version(self) -> int:
        """Weight version currently loaded (-1 before the first sync)."""
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
