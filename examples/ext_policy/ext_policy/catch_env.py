"""Catch: a ball falls down a small pixel grid; move the paddle under it.

The observation is the grid as a ``(size, size, 1)`` uint8 image (ball and paddle lit), so
rlpipe hands it to policies as ``env_obs["main_images"]``. Actions: 0 left, 1 stay,
2 right. The episode ends when the ball reaches the bottom row: reward +1 if the paddle is
under it, -1 otherwise. A random policy scores about -0.5; a perfect one 1.0.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CatchEnv(gym.Env):
    """The catch game (see the module docstring).

    Args:
        size: Grid width and height (episodes last ``size - 1`` steps).
        render_mode: ``"rgb_array"`` renders the grid upscaled, or None.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, size: int = 7, render_mode: str | None = None) -> None:
        if size < 3:
            raise ValueError(f"catch size must be at least 3, got {size}")
        self.size = size
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.ball = (0, 0)
        self.paddle = size // 2

    def _image(self) -> np.ndarray:
        grid = np.zeros((self.size, self.size, 1), dtype=np.uint8)
        grid[self.ball[0], self.ball[1], 0] = 255
        grid[self.size - 1, self.paddle, 0] = 128
        return grid

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Drop a new ball in a random column; the paddle starts in the middle."""
        super().reset(seed=seed)
        self.ball = (0, int(self.np_random.integers(self.size)))
        self.paddle = self.size // 2
        return self._image(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move the paddle, let the ball fall one row."""
        if not self.action_space.contains(int(action)):
            raise ValueError(f"catch actions are 0, 1, 2; got {action!r}")
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, self.size - 1))
        self.ball = (self.ball[0] + 1, self.ball[1])
        terminated = self.ball[0] == self.size - 1
        reward = 0.0
        if terminated:
            reward = 1.0 if self.paddle == self.ball[1] else -1.0
        return self._image(), reward, terminated, False, {}

    def render(self) -> np.ndarray | None:
        """RGB frame (32 pixels per cell) when ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            return None
        frame = np.repeat(np.repeat(self._image(), 32, axis=0), 32, axis=1)
        return np.repeat(frame, 3, axis=2)


def make_catch_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Env factory registered as ``catch``: ``env.kwargs`` go to :class:`CatchEnv`."""
    env: gym.Env = CatchEnv(**dict(env_cfg.kwargs), render_mode=render_mode)
    if env_cfg.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, env_cfg.max_episode_steps)
    return env
