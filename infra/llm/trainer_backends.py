"""Trainer backends of the reasoning actor: FSDP2 or megatron-core (``actor.backend``).

A backend owns the policy's parallel layout. The trainer worker
(:class:`infra.llm.workers.llm_workers.LLMActorWorker`) asks it to build the policy, join the
process group, hand out the full weights (for weight syncs, exports and checkpoints) and
save or load its shards; the update itself (:func:`rl_core.training.llm_update.llm_update`)
is the same for both.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from infra.checkpoint.store import CheckpointError
from infra.llm import distributed as fsdp
from infra.llm.trainer_backend_base import TrainerBackend
from rl_core.config import RLPipeConfig
from rl_core.llm.implementations import TRAINER_BACKENDS, resolve
from rl_core.models import get_model
from rl_core.models.lora import base_fingerprint, with_lora

logger = logging.getLogger(__name__)


#: ``model.dtype`` values computed in half precision.
HALF_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def mixed_precision_dtype(cfg: RLPipeConfig) -> torch.dtype | None:
    """The compute dtype of a trainer with float32 master weights, or None.

    ``actor.fsdp_config.master_weights: float32`` with a half-precision ``model.dtype``
    keeps the weights (and AdamW's state) in float32 and computes in ``model.dtype``.
    """
    if cfg.actor.fsdp_config.master_weights != "float32":
        return None
    return HALF_DTYPES.get(cfg.model.dtype)


class FSDPBackend(TrainerBackend):
    """Data-parallel FSDP2: every rank holds a shard of every parameter."""

    name = "fsdp"

    def __init__(self, cfg: RLPipeConfig, rank: int, world_size: int, device: torch.device) -> None:
        super().__init__(cfg, rank, world_size, device)
        policy = get_model(cfg.model, None)
        lora = cfg.lora_adapters()
        #: LoRA: only the adapters (and heads) train, sync and go into checkpoints.
        self.lora = lora is not None
        if self.lora:
            with_lora(policy, lora)
        #: Forward/backward dtype when the trainer keeps float32 master weights (None: the
        #: weights' own dtype).
        self.compute_dtype = mixed_precision_dtype(cfg)
        if self.compute_dtype is not None:
            policy = policy.to(torch.float32)  # the master weights; AdamW state follows them
        self.policy = policy.to(device)

    def setup(self, address: str) -> str:
        """Join the process group and shard the policy with ``fully_shard``."""
        fsdp_cfg = self.cfg.actor.fsdp_config
        fsdp.init_process_group(fsdp_cfg.backend, self.rank, self.world_size, address, self.device)
        units = fsdp.shard_model(self.policy, fsdp_cfg.wrap_policy, self.compute_dtype)
        precision = (
            f", float32 master weights computing in {self.cfg.model.dtype}"
            if self.compute_dtype is not None
            else ""
        )
        return f"{self.world_size} FSDP2 rank(s), {units} sharded units each{precision}"

    def rollout_state(self, every_rank: bool) -> dict[str, torch.Tensor]:
        """The unsharded weights (all-gathered), without the value head."""
        state = fsdp.full_state_dict(self.policy, every_rank=every_rank, trainable_only=self.lora)
        return self.policy.rollout_weights(state) if state else {}

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The unsharded policy state dict on rank 0 (LoRA: the trainable tensors alone)."""
        return fsdp.full_state_dict(self.policy, trainable_only=self.lora)

    def save_sharded(self, optimizer: torch.optim.Optimizer, path: Path) -> dict[str, Any]:
        """Model and optimizer shards with torch.distributed.checkpoint (signed).

        With LoRA, the adapters and their optimizer state only: the base weights are read
        from ``model.model_path`` again, and the base model's fingerprint is recorded.
        """
        fsdp.save_sharded(self.policy, optimizer, path, trainable_only=self.lora)
        if not self.lora:
            return {"backend": self.name}
        return {"backend": self.name, "lora": self.lora_record()}

    def lora_record(self) -> dict[str, Any]:
        """The adapters' settings and the base model's fingerprint (what they are valid on)."""
        lora = self.cfg.actor.lora.model_dump(mode="json")
        return {**lora, "base_fingerprint": base_fingerprint(self.cfg.model.model_path)}

    def load_sharded(
        self, optimizer: torch.optim.Optimizer, path: Path, saved: dict[str, Any], trust: bool
    ) -> None:
        """Model and optimizer shards (any FSDP world size: DCP reshards)."""
        self.check_writer(saved)
        self.check_lora(saved.get("lora"))
        fsdp.load_sharded(self.policy, optimizer, path, trust, trainable_only=self.lora)

    def check_lora(self, saved: dict[str, Any] | None) -> None:
        """Refuse shards written with(out) LoRA, other adapter settings, or another base.

        Raises:
            CheckpointError: They do not fit this run's ``actor.lora`` and base model.
        """
        if saved is None and not self.lora:
            return
        if saved is None or not self.lora:
            wrote, wants = (
                ("full weights", "LoRA adapters")
                if saved is None
                else ("LoRA adapters", "full weights")
            )
            raise CheckpointError(
                f"the checkpoint holds {wrote} but this run trains {wants} "
                f"(actor.lora.rank = {self.cfg.actor.lora.rank}); resume with the run's own "
                "actor.lora settings"
            )
        mine = self.lora_record()
        settings = ("rank", "alpha", "target_modules")
        changed = [k for k in settings if saved.get(k) != mine[k]]
        if changed:
            raise CheckpointError(
                "the checkpoint's LoRA adapters were trained with "
                + ", ".join(f"actor.lora.{k} = {saved.get(k)!r}" for k in changed)
                + "; this run has "
                + ", ".join(f"{mine[k]!r}" for k in changed)
            )
        if saved.get("base_fingerprint") != mine["base_fingerprint"]:
            raise CheckpointError(
                f"the checkpoint's LoRA adapters were trained on another base model "
                f"(fingerprint {saved.get('base_fingerprint')}; model.model_path = "
                f"{self.cfg.model.model_path!r} has {mine['base_fingerprint']}): adapters "
                "only fit the base they were trained on"
            )


__all__ = ["TRAINER_BACKENDS", "FSDPBackend", "TrainerBackend", "make_backend"]


def make_backend(
    cfg: RLPipeConfig, rank: int, world_size: int, device: torch.device
) -> TrainerBackend:
    """The backend ``cfg.actor.backend`` names, for trainer rank ``rank``.

    The megatron backend's module (it imports megatron-core) is imported only when named.
    """
    backend = resolve(TRAINER_BACKENDS.get(cfg.actor.backend))
    return backend(cfg, rank, world_size, device)
