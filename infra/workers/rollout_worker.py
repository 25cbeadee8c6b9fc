"""RolloutWorker: policy inference for env workers, refreshed by weight sync."""

from __future__ import annotations

from typing import Any

import ray
import torch

from infra.weight_sync import buckets_to_state_dict
from infra.workers.base import WorkerBase, worker_seed
from rl_core.models import get_model
from rl_core.training.batch import to_numpy_tree


class RolloutWorker(WorkerBase):
    """Holds a copy of the policy; answers ``predict`` calls from env workers."""

    group = "rollout"

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus)
        self.policy = get_model(self.cfg.model, spaces)
        self.policy.eval()
        self.generator = torch.Generator().manual_seed(
            worker_seed(self.cfg.run.seed, "rollout", rank)
        )
        self.version = -1

    @torch.no_grad()
    def predict(self, env_obs: dict[str, Any], mode: str = "train") -> tuple[Any, dict[str, Any]]:
        """Actions (env-ready numpy) and training extras for a batch of observations."""
        actions, result = self.policy.predict_action_batch(
            env_obs, mode=mode, compute_values=True, generator=self.generator
        )
        return actions, to_numpy_tree(result)

    def load_weights(self, bucket_refs: list[Any], version: int) -> int:
        """Replace the policy weights with those in ``bucket_refs``; returns the version."""
        buckets = ray.get(bucket_refs)
        self.policy.load_state_dict(buckets_to_state_dict(buckets), strict=True)
        self.version = version
        return version

    def get_version(self) -> int:
        """Weight version currently loaded (-1 before the first sync)."""
        return self.version

    def get_rng_state(self) -> torch.Tensor:
        """Sampling RNG state (checkpointed)."""
        return self.generator.get_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restore the sampling RNG state."""
        self.generator.set_state(state)
