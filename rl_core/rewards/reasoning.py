"""Built-in rule-based rewards for LLM reasoning (math): ``math_verify``, ``format``, ``composite``.

Reasoning rewards score a whole batch of completions at once. They are called with the
keywords ``prompts``, ``completions``, ``answers`` (lists of B strings), ``fields`` (the
dataset rows' extra fields, B dicts) and ``scale``, ignore any other keyword, and return a
float32 array of B rewards.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rl_core.rewards.builtin import env_reward
from rl_core.rewards.math_answers import answers_match, extract_final_answer, normalize_gold
from rl_core.rewards.registry import build_reward, get_reward, register_reward

logger = logging.getLogger(__name__)


def check_batch(prompts: Sequence[str], completions: Sequence[str], answers: Sequence[str]) -> int:
    """Check that a reasoning batch is consistent and return its size.

    Args:
        prompts: The B prompts.
        completions: The B completions.
        answers: The B gold answers.

    Returns:
        B.

    Raises:
        ValueError: The three sequences differ in length.
    """
    lengths = (len(prompts), len(completions), len(answers))
    if len(set(lengths)) != 1:
        raise ValueError(
            f"reasoning reward: prompts, completions and answers must have the same length, "
            f"got {lengths[0]}, {lengths[1]} and {lengths[2]}"
        )
    return lengths[0]


@register_reward("math_verify")
def math_verify_reward(
    *,
    prompts: Sequence[str],
    completions: Sequence[str],
    answers: Sequence[str],
    scale: float = 1.0,
    **_: Any,
) -> np.ndarray:
    """``scale`` for each completion whose final answer matches the gold answer, else 0.

    The final answer is found with :func:`~rl_core.rewards.math_answers.extract_final_answer`
    and the gold one with :func:`~rl_core.rewards.math_answers.normalize_gold` (so GSM8K
    solutions ending in ``#### 72`` work); a completion without an answer scores 0.

    Args:
        prompts: The B prompts (only their number is checked).
        completions: The B completions.
        answers: The B gold answers.
        scale: Reward of a correct completion.

    Returns:
        float32 array of B rewards.
    """
    size = check_batch(prompts, completions, answers)
    out = np.zeros(size, dtype=np.float32)
    for i, (completion, answer) in enumerate(zip(completions, answers, strict=True)):
        if answers_match(extract_final_answer(completion), normalize_gold(answer)):
            out[i] = scale
    logger.debug("math_verify: %d of %d completions correct", int(np.count_nonzero(out)), size)
    return out


@register_reward("format")
class FormatReward:
    """``scale`` for each completion matching ``reward.format_pattern`` (``re.DOTALL``), else 0.

    Args:
        reward_cfg: The ``reward`` config section (its ``format_pattern`` is compiled once).
    """

    def __init__(self, reward_cfg: Any) -> None:
        self.pattern = re.compile(reward_cfg.format_pattern, re.DOTALL)

    def __call__(
        self,
        *,
        prompts: Sequence[str],
        completions: Sequence[str],
        answers: Sequence[str],
        scale: float = 1.0,
        **_: Any,
    ) -> np.ndarray:
        """Score a batch (keywords as in the module docstring); float32 array of B rewards."""
        check_batch(prompts, completions, answers)
        hits = [self.pattern.search(completion) is not None for completion in completions]
        return np.asarray(hits, dtype=np.float32) * np.float32(scale)


@register_reward("composite")
class CompositeReward:
    """Weighted sum of other reasoning rewards: ``sum(weight * component)``.

    Components come from ``reward.components`` (reward name -> weight); each is built with
    :func:`~rl_core.rewards.registry.build_reward` from a copy of the ``reward`` section
    whose ``reward_type`` is the component's name, and is called with the same keywords
    (``scale`` included, so each component applies it itself).

    Args:
        reward_cfg: The ``reward`` config section.

    Raises:
        ValueError: No components, a non-finite weight, a component that is itself a
            composite (a cycle) or the embodied ``env`` reward.
        rl_core.registry.RegistryError: An unknown component name.
    """

    def __init__(self, reward_cfg: Any) -> None:
        components = dict(getattr(reward_cfg, "components", None) or {})
        own = reward_cfg.reward_type
        if not components:
            raise ValueError(f"reward_type {own!r} needs reward.components (reward name -> weight)")
        self.parts: list[tuple[str, float, Any]] = []
        for name, weight in components.items():
            entry = get_reward(name)
            if isinstance(entry, type) and issubclass(entry, CompositeReward):
                raise ValueError(
                    f"composite reward cycle: {own!r} -> {name!r} -> ... ({name!r} is a "
                    "composite itself); list its components directly"
                )
            if entry is env_reward:
                raise ValueError(
                    f"reward {own!r}: component {name!r} is the embodied env reward, not a "
                    "reasoning reward"
                )
            if not math.isfinite(weight):
                raise ValueError(f"reward {own!r}: component {name!r} has weight {weight}")
            sub_cfg = reward_cfg.model_copy(update={"reward_type": name})
            self.parts.append((name, float(weight), build_reward(sub_cfg)))

    def __call__(
        self,
        *,
        prompts: Sequence[str],
        completions: Sequence[str],
        answers: Sequence[str],
        **kwargs: Any,
    ) -> np.ndarray:
        """Score a batch (keywords as in the module docstring); float32 array of B rewards.

        Raises:
            ValueError: A component returned something other than B rewards.
        """
        size = check_batch(prompts, completions, answers)
        total = np.zeros(size, dtype=np.float64)
        for name, weight, component in self.parts:
            values = np.asarray(
                component(prompts=prompts, completions=completions, answers=answers, **kwargs),
                dtype=np.float64,
            )
            if values.shape != (size,):
                raise ValueError(
                    f"composite reward: component {name!r} returned shape {values.shape}, "
                    f"expected ({size},)"
                )
            total += weight * values
        return total.astype(np.float32)
