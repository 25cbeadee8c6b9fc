"""The trainer backend interface: what a trainer rank needs from its parallel backend.

Backends (:mod:`infra.llm.trainer_backends`, :mod:`infra.llm.megatron_backend`)
subclass :class:`TrainerBackend`; this module imports none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from infra.checkpoint.store import CheckpointError
from rl_core.config import RLPipeConfig
from rl_core.training.parallel_layout import ParallelLayout


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

    def __init__(self, cfg: RLPipeConfig, rank: int, world_size: int, device: torch.device) -> None:
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
