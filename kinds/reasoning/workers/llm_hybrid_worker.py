"""The hybrid engine of a reasoning run: trainer, rollout engine and reference in one process.

With collocated placement (RLinf's collocated mode, verl's hybrid engine) each trainer
rank (FSDP2 or megatron) also holds a rollout engine (``hf`` or ``vllm``) and, with a KL
penalty, the frozen reference model (the megatron backend keeps its own, tensor-parallel
like the trainer). A weight sync gathers the full weights on every rank and copies them
into its engine in memory (no serialization, no object store); generation and reference
log-probs run where the trainer is. Seeds, prompt splits and casts are those of separate
rollout and reference workers, so both placements learn the same weights from the same seed.

The engine and the trainer share the device Ray assigned the rank. The engine sleeps (frees
its device memory: :meth:`~infra.llm.engines.RolloutEngine.sleep`) whenever the trainer
computes (log-probs, update, supervised step, snapshot) and wakes when a weight sync or a
generation needs it. Each of those methods puts the engine in the state it needs before it
starts, so a retried step (or one that follows a failed one) always finds it right. On the
CPU both engines' sleep and wake are no-ops.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from infra.cluster.dispatch import Split, worker_method
from infra.cluster.worker_base import Stopwatch, step_method
from infra.llm.engines import RolloutEngine, make_engine
from infra.llm.workers.llm_workers import LLMActorWorker, reference_model
from kinds.reasoning.agent_rollout import run_agents
from kinds.reasoning.workers.llm_rollout_worker import generate_responses


class LLMHybridWorker(LLMActorWorker):
    """A trainer rank that also generates and scores reference log-probs.

    The rollout engine is built in :meth:`setup`, after the rank joined the trainer's
    process group: an engine that sets up ``torch.distributed`` itself (vLLM) then finds the
    trainer's group instead of creating a group of its own that the trainer would reuse.

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
        self.engine: RolloutEngine | None = None
        #: Whether the engine is awake (False between its ``sleep`` and ``wake``).
        self.engine_awake = True
        self.engine_version: int | None = None
        if self.cfg.algorithm.kl_coef > 0 and self.backend.name == "fsdp":
            with self._own_rng():  # loading models here leaves the trainer's RNG untouched
                self.reference = reference_model(self.cfg, self.device)

    @contextlib.contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Run with the trainer's random states (torch, numpy, python) put back afterwards.

        Engines seed generators for each call, and vLLM seeds all three when it starts.
        """
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        python_state, numpy_state = random.getstate(), np.random.get_state()
        try:
            with torch.random.fork_rng(devices=devices):
                yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)

    def setup(self, address: str) -> str:
        """Join the process group, shard the model, then start this rank's rollout engine."""
        layout = super().setup(address)
        if self.engine is None:
            with self._own_rng():
                self.engine = make_engine(
                    self.cfg.rollout.engine,
                    self.cfg.model,
                    self.cfg.rollout,
                    self.device,
                    collocated=True,
                    lora=self.cfg.lora_adapters(),
                )
            self.engine_awake = True
        return f"{layout}; {self.cfg.rollout.engine} rollout engine on {self.device}"

    # -- the engine's state --------------------------------------------------------------
    def _engine(self) -> RolloutEngine:
        if self.engine is None:
            raise RuntimeError(f"actor worker {self.rank}: setup() has not started the engine")
        return self.engine

    def _sleep_engine(self) -> None:
        """Give the device to the trainer: the engine sleeps (if it is awake)."""
        if self.engine is not None and self.engine_awake:
            self.engine.sleep()
            self.engine_awake = False

    def _wake_engine(self) -> RolloutEngine:
        """The engine, awake (woken if it sleeps)."""
        engine = self._engine()
        if not self.engine_awake:
            engine.wake()
            self.engine_awake = True
        return engine

    # -- trainer steps: the engine sleeps --------------------------------------------------
    @step_method
    def compute_logprobs(self, shard: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """See :meth:`LLMActorWorker.compute_logprobs` (with the engine asleep)."""
        self._sleep_engine()
        return super().compute_logprobs(shard)

    @step_method
    def update(
        self, shard: dict[str, np.ndarray], totals: list[tuple[float, int]], iteration: int
    ) -> dict[str, float]:
        """See :meth:`LLMActorWorker.update` (with the engine asleep)."""
        self._sleep_engine()
        return super().update(shard, totals, iteration)

    def sft_update(
        self, shard: dict[str, np.ndarray], totals: tuple[float, int], iteration: int
    ) -> dict[str, float]:
        """See :meth:`LLMActorWorker.sft_update` (with the engine asleep)."""
        self._sleep_engine()
        return super().sft_update(shard, totals, iteration)

    def snapshot(self) -> None:
        """See :meth:`LLMActorWorker.snapshot` (with the engine asleep: it copies the state)."""
        self._sleep_engine()
        super().snapshot()

    # -- rollout steps: the engine wakes ---------------------------------------------------
    @step_method
    def sync_rollout_weights(self, probe: dict[str, list[int]] | None = None) -> dict[str, Any]:
        """Copy the trainer's weights into this rank's engine (collective, in memory).

        Floating tensors are cast to ``rollout.weight_sync_dtype`` when set, as a sync
        between processes would send them (with LoRA, the adapters alone are copied). The
        engine is woken first.

        Args:
            probe: The sync probe: both the trainer and the engine score it afterwards.

        Returns:
            ``{"version", "mode": "memory", "nbytes": 0, "seconds"}``, with a probe also
            ``probe_logprobs`` (the trainer's) and ``engine_probe_logprobs``.
        """
        watch = Stopwatch()
        trainer_lp = self.probe_logprobs(probe) if probe is not None else None
        engine = self._wake_engine()
        state = self.backend.rollout_state(every_rank=True)
        dtype = self.sender.dtype
        if dtype is not None:
            state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        engine.update_weights(state.items(), self.version)
        self.engine_version = self.version
        meta = {"version": self.version, "mode": "memory", "nbytes": 0}
        if probe is not None:
            meta["probe_logprobs"] = trainer_lp
            with self._own_rng():
                meta["engine_probe_logprobs"] = engine.logprobs_of(
                    probe["prompt_ids"], probe["response_ids"]
                )
        return {**meta, "seconds": watch.elapsed()}

    @worker_method(split=Split.ROWS)
    @step_method
    def generate(
        self, prompt_ids: list[list[int]], sampling: dict[str, Any], seed: int | None
    ) -> dict[str, Any]:
        """Responses, token log-probs and finished flags from this rank's (woken) engine."""
        engine = self._wake_engine()
        with self._own_rng():  # the engine seeds torch's generator for each call
            return generate_responses(engine, prompt_ids, sampling, seed)

    @worker_method(split=Split.ROWS)
    @step_method
    def run_agents(
        self,
        prompt_ids: list[list[int]],
        sampling: dict[str, Any],
        seed: int | None,
        agent: dict[str, Any],
    ) -> dict[str, Any]:
        """One agent-loop trajectory per prompt from this rank's (woken) engine."""
        engine = self._wake_engine()
        with self._own_rng():
            out = run_agents(engine, prompt_ids, sampling, seed, agent)
        return out
