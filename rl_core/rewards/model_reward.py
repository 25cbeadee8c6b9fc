"""Model rewards: a reward model or an LLM judge scores responses, next to rule rewards.

The registered reward ``reward_model`` stands for the model configured in ``reward.model``
(a classifier reward model's scalar head, or a generative judge whose reply is parsed into
a number). Its scores come from reward-model workers, not from a function called in the
scoring task, so the registry entry is a marker (:attr:`ModelReward.scored_by_workers`):
:func:`reward_plan` splits a ``reward`` section into its rule part (fanned out as usual)
and its model part, and :func:`combine_scores` adds them up with their weights.

Outcomes of a scored row: a score (ok); a model failure (a judge reply without a score:
counted, and the row is left out of training, its score NaN, never a silent constant);
an infrastructure failure (a worker died or timed out: the step fails and is retried).

A judge's reply is read by a registered score parser (:func:`register_judge_parser`);
the built-ins are ``number`` (the first number of the reply) and ``yes_no`` (1 for yes,
0 for no).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rl_core.registry import Registry
from rl_core.rewards.registry import get_reward, register_reward

#: Name of the model reward in ``reward.reward_type`` and ``reward.components``.
MODEL_REWARD = "reward_model"
#: Placeholders a judge template must contain.
TEMPLATE_FIELDS = ("{prompt}", "{response}")

JudgeParser = Callable[[str], float | None]
#: Score parsers of judge replies: ``parser(reply) -> score``, or None when the reply
#: holds no score (a model failure).
JUDGE_PARSERS: Registry[JudgeParser] = Registry("judge parser", "rl_core.rewards.model_reward")


class JudgeParseError(ValueError):
    """A judge reply from which the configured parser could not read a score."""


def register_judge_parser(name: str, fn: JudgeParser | None = None, *, force: bool = False) -> Any:
    """Register a judge score parser (call or decorator form).

    Args:
        name: Name used as ``reward.model.parser``.
        fn: ``fn(reply) -> float | None`` (None: no score in the reply).
        force: Replace an existing registration.
    """
    if fn is None:
        return JUDGE_PARSERS.decorator(name, force=force)
    return JUDGE_PARSERS.register(name, fn, force=force)


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


@register_judge_parser("number")
def parse_number(reply: str) -> float | None:
    """The first number in ``reply`` (``"Score: 7/10"`` → 7.0); None without one."""
    match = _NUMBER.search(reply)
    return float(match.group()) if match else None


@register_judge_parser("yes_no")
def parse_yes_no(reply: str) -> float | None:
    """1.0 when the first yes/no word of ``reply`` is yes, 0.0 when no; None without one."""
    match = _YES_NO.search(reply)
    if match is None:
        return None
    return 1.0 if match.group(1).lower() == "yes" else 0.0


def parse_judge_reply(parser: str, reply: str) -> float:
    """The score in a judge ``reply`` read by the registered ``parser``.

    Raises:
        JudgeParseError: The reply holds no score (or a non-finite one); the message
            names the parser and quotes the reply.
    """
    score = JUDGE_PARSERS.get(parser)(reply)
    if score is None or not math.isfinite(score):
        raise JudgeParseError(f"judge parser {parser!r} found no score in the reply {reply!r}")
    return float(score)


def check_template(template: str) -> str:
    """Validate a judge prompt template: both placeholders, nothing else in braces.

    Raises:
        ValueError: A placeholder is missing, or the template does not format.
    """
    missing = [f for f in TEMPLATE_FIELDS if f not in template]
    if missing:
        raise ValueError(
            f"the judge template needs the placeholders {', '.join(TEMPLATE_FIELDS)}; "
            f"missing {', '.join(missing)} (write literal braces as {{{{ and }}}})"
        )
    try:
        template.format(prompt="", response="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"the judge template does not format with only prompt and response: {exc!r} "
            "(write literal braces as {{ and }})"
        ) from None
    return template


def format_judge_prompt(template: str, prompt: str, response: str) -> str:
    """The judge's input for one row: ``template`` with its placeholders filled."""
    return template.format(prompt=prompt, response=response)


@register_reward(MODEL_REWARD)
class ModelReward:
    """Marker of the model reward of ``reward.model`` (scored by reward-model workers).

    Args:
        reward_cfg: The ``reward`` config section.
    """

    #: Scores come from reward-model workers (see :func:`reward_plan`), not from a call.
    scored_by_workers = True

    def __init__(self, reward_cfg: Any) -> None:
        self.reward_cfg = reward_cfg

    def __call__(self, **_: Any) -> np.ndarray:
        """Refuses: the model reward is scored by workers, never in a scoring task.

        Raises:
            RuntimeError: Always.
        """
        raise RuntimeError(
            f"reward {MODEL_REWARD!r} is scored by the reward-model workers of reward.model, "
            "not in a scoring task"
        )


def scored_by_workers(name: str) -> bool:
    """Whether the registered reward ``name`` is scored by reward-model workers."""
    return bool(getattr(get_reward(name), "scored_by_workers", False))


@dataclass(frozen=True)
class RewardPlan:
    """A ``reward`` section split into its rule and model parts.

    Attributes:
        rules: Rule reward name → weight (scored in the scoring tasks).
        model_weight: Weight of the model reward.
        uses_model: Whether a reward model or judge scores the responses.
    """

    rules: dict[str, float] = field(default_factory=dict)
    model_weight: float = 0.0
    uses_model: bool = False


def reward_plan(reward_cfg: Any) -> RewardPlan:
    """Split ``reward_cfg`` into rule rewards and the model reward, with their weights.

    ``reward_type: reward_model`` is the model alone (weight 1); ``composite`` lists both
    kinds in ``components``; any other reward type is one rule of weight 1.
    """
    name = reward_cfg.reward_type
    if scored_by_workers(name):
        return RewardPlan({}, 1.0, True)
    components = dict(getattr(reward_cfg, "components", None) or {})
    if not components or not any(scored_by_workers(n) for n in components):
        return RewardPlan({name: 1.0})
    rules = {n: float(w) for n, w in components.items() if not scored_by_workers(n)}
    weight = sum(float(w) for n, w in components.items() if scored_by_workers(n))
    return RewardPlan(rules, weight, True)


def model_scores(raw: Sequence[float], scale: float, offset: float) -> np.ndarray:
    """Raw model scores → reward: ``scale * raw + offset`` (NaN stays NaN)."""
    return np.asarray(raw, dtype=np.float64) * scale + offset


def combine_scores(
    plan: RewardPlan,
    rules: Mapping[str, Sequence[float]],
    model: Sequence[float] | None,
) -> np.ndarray:
    """``sum(weight * component)`` over the plan's rule and model components.

    A row whose model score is NaN (a model failure) stays NaN: it is left out of training.

    Args:
        plan: The reward's plan (:func:`reward_plan`).
        rules: Each rule component's B scores.
        model: The model reward's B scores (already scaled and offset), or None.

    Returns:
        float32 array of B rewards.

    Raises:
        ValueError: A component is missing or of another length.
    """
    parts: list[tuple[str, float, np.ndarray]] = []
    for name, weight in plan.rules.items():
        if name not in rules:
            raise ValueError(f"no scores for the rule reward {name!r}")
        parts.append((name, weight, np.asarray(rules[name], dtype=np.float64)))
    if plan.uses_model:
        if model is None:
            raise ValueError(f"no scores for the model reward {MODEL_REWARD!r}")
        parts.append((MODEL_REWARD, plan.model_weight, np.asarray(model, dtype=np.float64)))
    if not parts:
        raise ValueError("a reward plan without components")
    size = len(parts[0][2])
    total = np.zeros(size, dtype=np.float64)
    for name, weight, values in parts:
        if values.shape != (size,):
            raise ValueError(f"component {name!r} has {values.shape} scores, expected ({size},)")
        total += weight * values
    return total.astype(np.float32)
