"""Built-in rewards for embodied rollouts."""

from __future__ import annotations

import numpy as np

from rl_core.rewards.registry import register_reward


@register_reward("env")
def env_reward(rewards: np.ndarray, scale: float = 1.0, **_: object) -> np.ndarray:
    """The environment's own reward, multiplied by ``scale``."""
    return rewards * np.float32(scale) if scale != 1.0 else rewards
