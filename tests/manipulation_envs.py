"""Helpers of the manipulation env tests: play actions, compare what two envs produced."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def play(env: gym.Env, actions: np.ndarray) -> list[tuple]:
    """Step ``env`` with each action; ``(obs copy, reward, terminated, truncated, success)``."""
    frames = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        obs = {k: np.array(v) for k, v in obs.items()} if isinstance(obs, dict) else obs.copy()
        frames.append((obs, reward, terminated, truncated, info["success"]))
    return frames


def assert_same_frames(a: list[tuple], b: list[tuple]) -> None:
    """Two :func:`play` results are equal, observations bit for bit."""
    for fa, fb in zip(a, b, strict=True):
        if isinstance(fa[0], dict):
            assert fa[0].keys() == fb[0].keys()
            for key in fa[0]:
                np.testing.assert_array_equal(fa[0][key], fb[0][key])
        else:
            np.testing.assert_array_equal(fa[0], fb[0])
        assert fa[1:] == fb[1:]


def random_actions(n: int, seed: int = 0, dim: int = 4) -> np.ndarray:
    """``n`` uniform actions in [-1, 1]^dim."""
    return np.random.default_rng(seed).uniform(-1, 1, (n, dim)).astype(np.float32)
