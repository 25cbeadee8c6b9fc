"""The rollout engine interface: what a rollout worker needs from an inference engine.

Engines (:mod:`infra.reasoning.engines`, :mod:`infra.reasoning.vllm_engine`) subclass
:class:`RolloutEngine`; this module imports none of them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable

import torch

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

    @abc.abstractmethod
    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Overwrite the named parameters (names as in the trainer's HF state dict)."""

    def sleep(self) -> None:  # noqa: B027 - optional for engines that hold no device memory
        """Release device memory until :meth:`wake` (no-op by default and on the CPU).

        The hybrid engine calls it while the trainer in the same process computes, and
        calls :meth:`wake` before the next weight sync or generation; calls alternate.
        """

    def wake(self) -> None:  # noqa: B027
        """Undo :meth:`sleep`: the engine can take weights and generate again."""
