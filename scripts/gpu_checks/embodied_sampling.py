"""GPU check of embodied sampling: the actor-critic (discrete and Gaussian) and the SAC
policy sample on CUDA with the worker's seeded CPU generator, and draw the same actions as
the same policy on CPU (the run seed decides the actions wherever the policy lives)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

#: (preset, observation size, action space) of each checked policy.
CASES = {
    "ppo_cartpole": (4, gym.spaces.Discrete(2)),
    "ppo_pendulum": (3, gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
    "sac_pendulum": (3, gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
}


def _actions(policy: torch.nn.Module, states: torch.Tensor, seed: int) -> np.ndarray:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        actions, _ = policy.predict_action_batch(
            {"states": states}, mode="train", generator=generator
        )
    return np.asarray(actions, dtype=np.float64)


def check(device: torch.device) -> dict[str, Any]:
    """Sample 256 actions per policy on CPU and on CUDA from the same seed; returns the
    largest difference per preset (``ok``: discrete actions equal, continuous ones within
    float32 rounding)."""
    from rl_core.config import load_config
    from rl_core.envs.registry import EnvSpaces
    from rl_core.models import get_model

    out: dict[str, Any] = {}
    ok = True
    for preset, (obs_size, action_space) in CASES.items():
        cfg = load_config(preset)
        spaces = EnvSpaces(gym.spaces.Box(-10.0, 10.0, (obs_size,), np.float32), action_space)
        torch.manual_seed(0)
        policy = get_model(cfg.model, spaces).eval()
        states = torch.randn(256, obs_size, generator=torch.Generator().manual_seed(1))
        on_cpu = _actions(policy, states, seed=2)
        on_device = _actions(policy.to(device), states.to(device), seed=2)
        diff = float(np.abs(on_cpu - on_device).max())
        out[preset] = diff
        ok = ok and diff < (1e-4 if isinstance(action_space, gym.spaces.Box) else 0.5)
    out["ok"] = ok
    return out
