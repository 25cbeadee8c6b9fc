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
from torch import nn

from infra.checkpoint.store import CheckpointError
from infra.reasoning import distributed as fsdp
from rl_core.models import get_model
from rl_core.registry import Registry
from rl_core.training.parallel_layout import ParallelLayout

logger = logging.getLogger(__name__)


class TrainerBackend:
    """What a trainer rank needs from its parallel backend.

    Args:
        cfg: The validated run config.
        rank: This trainer rank.
        world_size: Trainer ranks.
        device: Where the policy computes.

    Attributes:
        policy: The trainable policy (after :meth:`setup` at the latest).
        reference: A frozen reference policy this backend computes with, if it keeps one
            (None: the run's reference model lives elsewhere).
        layout: Which ranks form a data-parallel replica.
    """

    name = "base"

    def __init__(self, cfg: Any, rank: int, world_size: int, device: torch.device) -> None:
        self.cfg, self.rank, self.world_size, self.device = cfg, rank, world_size, device
        self.policy: nn.Module | None = None
        self.reference: nn.Module | None = None
        self.layout = ParallelLayout(world_size, cfg.actor.tensor_parallel_size)

    @property
    def data_parallel_size(self) -> int:
        """Replicas the batch is split across."""
        return self.layout.replicas

    def setup(self, address: str) -> str:
        """Join the process group at ``address`` and finish the policy (collective).

        Returns:
            One line describing the layout, for the log.
        """
        raise NotImplementedError

    def rollout_state(self, every_rank: bool) -> dict[str, torch.Tensor]:
        """The weights a rollout engine loads, under Hugging Face names (collective).

        Args:
            every_rank: Every rank gets them; otherwise only rank 0 (others: empty dict).
        """
        raise NotImplementedError

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The whole policy under the Hugging Face policy's names on rank 0 (collective)."""
        raise NotImplementedError

    def save_sharded(self, optimizer: torch.optim.Optimizer, path: Path) -> dict[str, Any]:
        """Write this rank's shards of model and optimizer into ``path`` (collective).

        Returns:
            What :meth:`load_sharded` needs to know about the layout that wrote them.
        """
        raise NotImplementedError

    def load_sharded(
        self, optimizer: torch.optim.Optimizer, path: Path, saved: dict[str, Any], trust: bool
    ) -> None:
        """Restore what :meth:`save_sharded` wrote (``saved``: its return value)."""
        raise NotImplementedError

    def check_writer(self, saved: dict[str, Any]) -> None:
        """Refuse trainer shards another backend wrote (``saved``: the writer's layout).

        Raises:
            CheckpointError: Another backend wrote them.
        """
        writer = saved.get("backend", "fsdp")
        if writer != self.name:
            raise CheckpointError(
                f"the checkpoint's trainer shards were written by the {writer!r} backend; "
                f"actor.backend = {self.name!r} loads its own shards only (start a new run "
                "from the checkpoint's Hugging Face weights with model.model_path instead, "
                "or resume with actor.backend: " + writer + ")"
            )


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


#: ``actor.backend`` → backend class.
TRAINER_BACKENDS: Registry[type[TrainerBackend]] = Registry("trainer backend")
TRAINER_BACKENDS.register("fsdp", FSDPBackend)


def make_backend(cfg: Any, rank: int, world_size: int, device: torch.device) -> TrainerBackend:
    """The backend ``cfg.actor.backend`` names, for trainer rank ``rank``."""
    if cfg.actor.backend == "megatron" and "megatron" not in TRAINER_BACKENDS:
        from infra.reasoning import megatron_backend  # noqa: F401 - registers it (imports megatron)
    return TRAINER_BACKENDS.get(cfg.actor.backend)(cfg, rank, world_size, device)
