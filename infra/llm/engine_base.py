"""The rollout engine interface: what a rollout worker needs from an inference engine.

Engines (:mod:`infra.llm.engines`, :mod:`infra.llm.vllm_engine`) subclass
:class:`RolloutEngine`; this module imports none of them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable

import torch

from rl_core.agents.lockstep import GenerationRequest
from rl_core.agents.loops import Generation
from rl_core.llm.generation import GenerationResult, SamplingParams


class RolloutEngine(abc.ABC):
    """What a rollout worker needs from an inference engine."""

    version: int = -1
    #: True when ``update_weights`` must get every tensor (the engine reloads whole layers).
    full_updates_only: bool = False

    @abc.abstractmethod
    def generate(
        self, prompt_ids: list[list[int]], sampling: SamplingParams, seed: int | None
    ) -> GenerationResult:
        """One response (and its token log-probs) per prompt."""

    def generate_turns(
        self, requests: list[GenerationRequest], sampling: SamplingParams, seed: int | None
    ) -> list[Generation]:
        """One agent-loop turn per request: its own context, stop texts and token limit.

        Engines that run agent loops (``agent.loop`` other than ``single_turn``) override
        it; each :class:`~rl_core.agents.loops.Generation` carries the engine's weight
        version and why it ended (``"eos"``, ``"stop"``, ``"length"``), and the tokens of a
        stop text stay in it.

        Raises:
            NotImplementedError: This engine cannot run agent loops.
        """
        raise NotImplementedError(
            f"rollout engine {type(self).__name__} cannot run agent loops (it has no "
            "generate_turns); use agent.loop=single_turn or an engine that has it (hf, vllm)"
        )

    @abc.abstractmethod
    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Overwrite the named parameters (names as in the trainer's HF state dict)."""

    def logprobs_of(self, prompt_ids: list[int], response_ids: list[int]) -> list[float] | None:
        """Log-probs of ``response_ids`` after ``prompt_ids`` under the loaded weights.

        The weight-sync parity probe (:mod:`rl_core.llm.sync_probe`) compares them with the
        trainer's. None (the default): this engine cannot score a given text, and the probe
        skips it.
        """
        return None

    def sleep(self) -> None:  # noqa: B027 - optional for engines that hold no device memory
        """Release device memory until :meth:`wake` (no-op by default and on the CPU).

        The hybrid engine calls it while the trainer in the same process computes, and
        calls :meth:`wake` before the next weight sync or generation; calls alternate.
        """

    def wake(self) -> None:  # noqa: B027
        """Undo :meth:`sleep`: the engine can take weights and generate again."""
