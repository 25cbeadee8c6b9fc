"""The hybrid engine of a reasoning run: trainer, rollout engine and reference in one process.

With collocated placement (RLinf's collocated mode, verl's hybrid engine) each trainer
rank (FSDP2 or megatron) also holds a rollout engine and, with a KL penalty, the frozen
reference model (the megatron backend keeps its own, tensor-parallel like the trainer). A
weight sync gathers the full weights on every rank and copies them into its
engine in memory (no serialization, no object store); generation and reference log-probs
run where the trainer is. Seeds, prompt splits and casts are those of separate rollout and
reference workers, so both placements learn the same weights from the same seed.
"""

from __future__ import annotations

from typing import Any

import torch

from infra.llm.engines import make_engine
from infra.workers.base import Stopwatch, step_method
from infra.workers.llm_rollout_worker import generate_responses
from infra.workers.llm_workers import LLMActorWorker, reference_model


class LLMHybridWorker(LLMActorWorker):
    """A trainer rank that also generates and scores reference log-probs.

    Args:
        config: Resolved config (dict).
        rank: Trainer rank (also the rank of its rollout engine).
        cpus: CPUs to pin to.
        world_size: Number of trainer ranks.
    """

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], world_size: int
    ) -> None:
        super().__init__(config, rank, cpus, world_size)
        with self._own_rng():  # loading models here leaves the trainer's RNG untouched
            self.engine = make_engine(self.cfg.rollout.engine, self.cfg.model, self.cfg.rollout)
            if self.cfg.algorithm.kl_coef > 0 and self.backend.name == "fsdp":
                self.reference = reference_model(self.cfg, self.device)
        self.engine_version: int | None = None

    def _own_rng(self) -> Any:
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        return torch.random.fork_rng(devices=devices)

    @step_method
    def sync_rollout_weights(self) -> dict[str, Any]:
        """Copy the trainer's full weights into this rank's engine (collective, in memory).

        Floating tensors are cast to ``rollout.weight_sync_dtype`` when set, as a sync
        between processes would send them.

        Returns:
            ``{"version", "mode": "memory", "nbytes": 0, "seconds"}``.
        """
        watch = Stopwatch()
        state = self.backend.rollout_state(every_rank=True)
        dtype = self.sender.dtype
        if dtype is not None:
            state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        self.engine.update_weights(state.items(), self.version)
        self.engine_version = self.version
        return {"version": self.version, "mode": "memory", "nbytes": 0, "seconds": watch.elapsed()}

    @step_method
    def generate(
        self, prompt_ids: list[list[int]], sampling: dict[str, Any], seed: int | None
    ) -> dict[str, Any]:
        """Responses, token log-probs and finished flags from this rank's engine."""
        with self._own_rng():  # the engine seeds torch's generator for each call
            return generate_responses(self.engine, prompt_ids, sampling, seed)

    def get_version(self) -> int | None:
        """Weight version of the engine (None before the first sync)."""
        return self.engine_version
