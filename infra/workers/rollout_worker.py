"""RolloutWorker: policy inference for env workers, refreshed by weight sync."""

from __future__ import annotations

from typing import Any

import ray
import torch

from infra.weight_sync import buckets_to_state_dict
from infra.workers.base import WorkerBase
from rl_core.models import get_model
from rl_core.seeding import sampling_seed, worker_seed
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
        self.seed = worker_seed(self.cfg.run.seed, "rollout", rank)
        # One sampling stream per calling env worker: requests of different env workers
        # interleave in arrival order, so a shared stream would not be reproducible.
        self.generators: dict[int, torch.Generator] = {}
        self.version = -1

    def _generator(self, caller: int) -> torch.Generator:
        if caller not in self.generators:
            self.generators[caller] = torch.Generator().manual_seed(
                sampling_seed(self.seed, caller)
            )
        return self.generators[caller]

    @torch.no_grad()
    def predict(
        self, env_obs: dict[str, Any], mode: str = "train", caller: int = 0
    ) -> tuple[Any, dict[str, Any]]:
        """Actions (env-ready numpy) and training extras for a batch of observations.

        Args:
            env_obs: Batched observations.
            mode: ``train`` (sample) or ``eval`` (deterministic).
            caller: Rank of the calling env worker (selects its sampling stream).
        """
        actions, result = self.policy.predict_action_batch(
            env_obs, mode=mode, compute_values=True, generator=self._generator(caller)
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

    def get_rng_state(self) -> dict[int, torch.Tensor]:
        """Sampling RNG states per caller (checkpointed)."""
        return {caller: g.get_state() for caller, g in self.generators.items()}

    def snapshot(self) -> None:
        """Keep the sampling streams' state (before a rollout)."""
        self._snapshot = self.get_rng_state()

    def restore_snapshot(self) -> None:
        """Put back the sampling streams kept by :meth:`snapshot`."""
        self.generators = {}
        self.set_rng_state(self._snapshot)

    def set_rng_state(self, state: dict[int, torch.Tensor]) -> None:
        """Restore the sampling RNG states."""
        for caller, value in state.items():
            self._generator(int(caller)).set_state(value)
