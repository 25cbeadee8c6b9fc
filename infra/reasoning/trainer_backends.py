"""Trainer backends of the reasoning actor: FSDP2 or megatron-core (``actor.backend``).

A backend owns the policy's parallel layout. The trainer worker
(:class:`infra.reasoning.workers.llm_workers.LLMActorWorker`) asks it to build the policy, join the
process group, hand out the full weights (for weight syncs, exports and checkpoints) and
save or load its shards; the update itself (:func:`rl_core.training.llm_update.llm_update`)
is the same for both.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from infra.reasoning import distributed as fsdp
from infra.reasoning.trainer_backend_base import TrainerBackend
from rl_core.llm.implementations import TRAINER_BACKENDS, resolve
from rl_core.models import get_model

logger = logging.getLogger(__name__)


class FSDPBackend(TrainerBackend):
    """Data-parallel FSDP2: every rank holds a shard of every parameter."""

    name = "fsdp"

    def __init__(self, cfg: Any, rank: int, world_size: int, device: torch.device) -> None:
        super().__init__(cfg, rank, world_size, device)
        self.policy = get_model(cfg.model, None).to(device)

    def setup(self, address: str) -> str:
        """Join the process group and shard the policy with ``fully_shard``."""
        fsdp_cfg = self.cfg.actor.fsdp_config
        fsdp.init_process_group(fsdp_cfg.backend, self.rank, self.world_size, address, self.device)
        units = fsdp.shard_model(self.policy, fsdp_cfg.wrap_policy)
        return f"{self.world_size} FSDP2 rank(s), {units} sharded units each"

    def rollout_state(self, every_rank: bool) -> dict[str, torch.Tensor]:
        """The unsharded weights (all-gathered), without the value head."""
        state = fsdp.full_state_dict(self.policy, every_rank=every_rank)
        return self.policy.rollout_weights(state) if state else {}

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The unsharded policy state dict on rank 0."""
        return fsdp.full_state_dict(self.policy)

    def save_sharded(self, optimizer: torch.optim.Optimizer, path: Path) -> dict[str, Any]:
        """Model and optimizer shards with torch.distributed.checkpoint (signed)."""
        fsdp.save_sharded(self.policy, optimizer, path)
        return {"backend": self.name}

    def load_sharded(
        self, optimizer: torch.optim.Optimizer, path: Path, saved: dict[str, Any], trust: bool
    ) -> None:
        """Model and optimizer shards (any FSDP world size: DCP reshards)."""
        self.check_writer(saved)
        fsdp.load_sharded(self.policy, optimizer, path, trust)


__all__ = ["TRAINER_BACKENDS", "FSDPBackend", "TrainerBackend", "make_backend"]


def make_backend(cfg: Any, rank: int, world_size: int, device: torch.device) -> TrainerBackend:
    """The backend ``cfg.actor.backend`` names, for trainer rank ``rank``.

    The megatron backend's module (it imports megatron-core) is imported only when named.
    """
    backend = resolve(TRAINER_BACKENDS.get(cfg.actor.backend))
    return backend(cfg, rank, world_size, device)
