"""RolloutWorker: policy inference for env workers, refreshed by weight sync."""

from __future__ import annotations

from typing import Any

import ray

from infra.cluster.worker_base import WorkerBase, resolve
from infra.weight_sync import buckets_to_state_dict
from kinds.embodied.workers.rollout_policy import RolloutPolicy, ServesRollout, kept_versions
from rl_core.models import get_model
from rl_core.seeding import worker_seed


class RolloutWorker(ServesRollout, WorkerBase):
    """Holds a copy of the policy; answers ``predict`` calls from env workers.

    The copy lives on the worker's device (``self.device``); synced weights arrive as CPU
    arrays and are copied into it, actions go back to env workers as CPU numpy.
    """

    group = "rollout"

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus)
        self.sampling = RolloutPolicy(
            get_model(self.cfg.model, resolve(spaces)).to(self.device),
            worker_seed(self.cfg.run.seed, "rollout", rank),
            keep_versions=kept_versions(self.cfg),
        )

    def load_weights(self, bucket_refs: list[Any], version: int) -> int:
        """Replace the policy weights with those in ``bucket_refs``; returns the version."""
        return self.sampling.load_state_dict(buckets_to_state_dict(ray.get(bucket_refs)), version)
