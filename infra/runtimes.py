"""Which runtime drives a run: registered per model category (embodied, reasoning)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_core.config import RLPipeConfig
from rl_core.registry import Registry


def _embodied(cfg: RLPipeConfig) -> Any:
    from infra.runtime import TrainingRuntime

    return TrainingRuntime(cfg)


def _reasoning(cfg: RLPipeConfig) -> Any:
    from infra.reasoning_runtime import ReasoningRuntime

    return ReasoningRuntime(cfg)


RUNTIMES: Registry[Callable[[RLPipeConfig], Any]] = Registry("runtime")
RUNTIMES.register("embodied", _embodied)
RUNTIMES.register("reasoning", _reasoning)


def make_runtime(cfg: RLPipeConfig) -> Any:
    """Build the worker groups of ``cfg`` with the runtime of its model's category."""
    return RUNTIMES.get(cfg.category)(cfg)
