"""GPU check of embodied sampling and training: the actor-critic (discrete and Gaussian)
and the SAC policy sample on CUDA with the worker's seeded CPU generator and draw the same
actions as the same policy on CPU (the run seed decides the actions wherever the policy
lives); one PPO and one SAC update on CUDA give the CPU's weights up to float32 rounding;
a policy trained on CUDA survives a checkpoint round trip (:mod:`.embodied_updates`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from scripts.gpu_checks.embodied_updates import checkpoint_round_trip, ppo_on, sac_on

#: (preset, observation size, action space) of each checked policy.
CASES = {
    "ppo_cartpole": (4, gym.spaces.Discrete(2)),
    "ppo_pendulum": (3, gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
    "sac_pendulum": (3, gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
}
#: Largest weight difference between an update on CUDA and on CPU (float32 rounding).
UPDATE_TOLERANCE = 1e-4


def _actions(policy: torch.nn.Module, states: torch.Tensor | np.ndarray, seed: int) -> np.ndarray:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        actions, _ = policy.predict_action_batch(
            {"states": states}, mode="train", generator=generator
        )
    return np.asarray(actions, dtype=np.float64)


def _sampling(device: torch.device) -> tuple[dict[str, float], bool]:
    """Sample 256 actions per policy on CPU and on the device from the same seed; the
    largest difference per preset (ok: discrete actions equal, continuous ones within
    float32 rounding)."""
    from rl_core.config import load_config
    from rl_core.envs.registry import EnvSpaces
    from rl_core.models import get_model

    out: dict[str, float] = {}
    ok = True
    for preset, (obs_size, action_space) in CASES.items():
        cfg = load_config(preset)
        spaces = EnvSpaces(gym.spaces.Box(-10.0, 10.0, (obs_size,), np.float32), action_space)
        torch.manual_seed(0)
        policy = get_model(cfg.model, spaces).eval()
        states = torch.randn(256, obs_size, generator=torch.Generator().manual_seed(1))
        on_cpu = _actions(policy, states, seed=2)
        # numpy observations, as env workers send them: the policy moves them itself
        on_device = _actions(policy.to(device), states.numpy(), seed=2)
        diff = float(np.abs(on_cpu - on_device).max())
        out[preset] = diff
        ok = ok and diff < (1e-4 if isinstance(action_space, gym.spaces.Box) else 0.5)
    return out, ok


def check(device: torch.device) -> dict[str, Any]:
    """Sampling, one PPO and one SAC update on CPU and on ``device``, and a checkpoint
    round trip on ``device``.

    Returns:
        ``sampling`` (largest action difference per preset), ``ppo_update`` and
        ``sac_update`` (largest weight difference, ok below :data:`UPDATE_TOLERANCE`),
        ``checkpoint`` (what the round trip kept), and ``ok``.
    """
    sampling, ok = _sampling(device)
    ppo, sac = ppo_on(device), sac_on(device)
    checkpoint = checkpoint_round_trip(ppo, sac)
    ok = (
        ok
        and ppo["max_weight_diff"] < UPDATE_TOLERANCE
        and sac["max_weight_diff"] < UPDATE_TOLERANCE
        and all(checkpoint.values())
    )
    return {
        "sampling": sampling,
        "ppo_update": {k: ppo[k] for k in ("max_weight_diff", "minibatch_updates")},
        "sac_update": {k: sac[k] for k in ("max_weight_diff", "gradient_steps")},
        "checkpoint": checkpoint,
        "ok": ok,
    }
