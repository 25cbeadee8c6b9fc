"""Scoring a chunk of responses with the configured reward (runs in any process)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kinds.reasoning.sections import ReasoningRewardConfig
from rl_core.rewards import build_reward


def score_chunk(reward_cfg: dict[str, Any], chunk: dict[str, list[Any]]) -> list[float]:
    """Rewards of one chunk: ``chunk`` has ``prompts``, ``completions``, ``answers``, ``fields``.

    Extension modules are imported first, so rewards registered by a user package resolve
    in Ray task workers too.

    Raises:
        ValueError: The reward returned a different number of scores than responses.
    """
    from infra.extensions import load_extension_modules

    load_extension_modules()
    cfg = ReasoningRewardConfig.model_validate(reward_cfg)
    scores = np.asarray(build_reward(cfg)(scale=cfg.scale, **chunk), dtype=np.float32)
    if scores.shape != (len(chunk["completions"]),):
        raise ValueError(
            f"reward {cfg.reward_type!r} returned {scores.shape} scores for "
            f"{len(chunk['completions'])} responses"
        )
    return scores.tolist()
