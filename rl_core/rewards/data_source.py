"""``data_source``: each row scored by the built-in reward its ``data_source`` column names.

verl's prepared files name where each row comes from (``data_source``: ``openai/gsm8k``,
``lighteval/MATH``...); verl picks the scorer from it, and so does this reward, the default
of reasoning runs. Rows of one batch may come from different sources: each group of rows
is scored by its own reward. :data:`DATA_SOURCE_REWARDS` maps a source to a registered
reward; add your own with :func:`register_data_source`.

A row without ``data_source``, or with one nobody registered, stops the run with the list
of known sources: set ``reward.reward_type`` (or ``reward.function``) to score such data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rl_core.registry import Registry
from rl_core.rewards.registry import build_reward, register_reward

#: ``data_source`` → name of the registered reward scoring its rows.
DATA_SOURCE_REWARDS: Registry[str] = Registry("data source")

_MATH_SOURCES = (
    "openai/gsm8k",
    "gsm8k",
    "lighteval/MATH",
    "DigitalLearningGmbH/MATH-lighteval",
    "HuggingFaceH4/MATH-500",
    "math",
    "math_dapo",
    "numina_aops_forum",
    "numina_synthetic_math",
    "numina_amc_aime",
    "numina_synthetic_amc",
    "numina_cn_k12",
    "numina_olympiads",
)


def register_data_source(name: str, reward: str, *, force: bool = False) -> str:
    """Score rows whose ``data_source`` is ``name`` with the registered reward ``reward``."""
    return DATA_SOURCE_REWARDS.register(name, reward, force=force)


for _source in _MATH_SOURCES:
    register_data_source(_source, "math_verify")


@register_reward("data_source")
class DataSourceReward:
    """The ``data_source`` reward (module docstring).

    Args:
        reward_cfg: The ``reward`` section; each source's reward is built from a copy of it.
    """

    def __init__(self, reward_cfg: Any) -> None:
        self.cfg = reward_cfg
        self._rewards: dict[str, Any] = {}

    def __call__(
        self,
        *,
        completions: Sequence[str],
        fields: Sequence[dict[str, Any]],
        **kwargs: Any,
    ) -> np.ndarray:
        """Each row's score from the reward of its ``data_source`` (float32, B rows).

        Raises:
            ValueError: A row without ``data_source`` or with an unknown one.
        """
        groups: dict[str, list[int]] = {}
        for i, row in enumerate(fields):
            groups.setdefault(self._reward_name(row.get("data_source"), i), []).append(i)
        out = np.zeros(len(completions), dtype=np.float32)
        for name, rows in groups.items():
            part = {
                k: [v[i] for i in rows] if isinstance(v, (list, tuple)) else v
                for k, v in kwargs.items()
            }
            scores = self._reward(name)(
                completions=[completions[i] for i in rows],
                fields=[fields[i] for i in rows],
                **part,
            )
            out[rows] = np.asarray(scores, dtype=np.float32)
        return out

    def _reward_name(self, source: Any, row: int) -> str:
        if isinstance(source, str) and source in DATA_SOURCE_REWARDS:
            return DATA_SOURCE_REWARDS.get(source)
        known = ", ".join(DATA_SOURCE_REWARDS.names())
        what = "has no data_source column" if source is None else f"has data_source {source!r}"
        raise ValueError(
            f"reward_type 'data_source': row {row} {what}; known data sources: {known}. Set "
            "reward.reward_type (math_verify, code_tests, ...) or reward.function to score it"
        )

    def _reward(self, name: str) -> Any:
        if name not in self._rewards:
            self._rewards[name] = build_reward(
                self.cfg.model_copy(update={"reward_type": name, "components": {}})
            )
        return self._rewards[name]
