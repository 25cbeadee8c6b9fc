"""A reward transform and an advantage estimator registered from outside rlpipe."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rl_core.algorithms import compute_gae


def sign_reward(rewards: np.ndarray, scale: float = 1.0, **_: Any) -> np.ndarray:
    """Reward ``reward.reward_type: sign``: ``scale * sign(r)`` (Atari-style clipping)."""
    return np.sign(rewards).astype(np.float32) * np.float32(scale)


def monte_carlo_advantage(**kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantage ``algorithm.adv_type: monte_carlo``: discounted return minus V(s).

    This is GAE with ``lambda = 1`` (Schulman et al. 2016, eq. 18): the full discounted
    return, bootstrapped only where an episode is truncated or the batch ends. It takes the
    same keywords as every registered estimator and ignores ``gae_lambda``.
    """
    kwargs["gae_lambda"] = 1.0
    return compute_gae(**kwargs)
