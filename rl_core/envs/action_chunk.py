"""Action chunks: the policy emits ``chunk`` actions at once, the env plays them in order.

The convention of RLinf's OpenVLA-OFT recipes: the chunk is one flat ``Box`` of ``chunk``
times the env's action (a policy with a flat action head needs nothing special), the
rewards of the played actions add up, and the chunk stops early when the episode ends.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


class ActionChunk(gym.Wrapper):
    """Play a chunk of ``chunk`` actions of a ``Box``-action env per step.

    ``step(actions)`` takes ``chunk * prod(action_shape)`` numbers (a flat vector, or
    anything of that size), plays them in order and returns the observation after the last
    one played, the sum of their rewards, and the termination and truncation of the last
    one: when the episode ends inside the chunk, the rest of the chunk is not played.
    ``info`` is the last step's, with ``chunk_steps`` (actions played) added and
    ``success`` (when the env reports it) true if any played step succeeded.

    An env may define ``step_without_observation(action) -> (reward, terminated,
    truncated, info)`` and ``current_observation()``: the chunk then makes only the
    observation it returns (e.g. renders one camera image per chunk, not one per action).

    Args:
        env: An env with a ``Box`` action space.
        chunk: Actions per chunk (1 plays one action per step, flattening nothing else).

    Raises:
        ValueError: ``chunk`` is below 1 or the action space is not a ``Box``.
    """

    def __init__(self, env: gym.Env, chunk: int) -> None:
        super().__init__(env)
        if chunk < 1:
            raise ValueError(f"an action chunk needs at least one action, got {chunk}")
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"ActionChunk needs a Box action space, got {space}")
        self.chunk = int(chunk)
        self._single_shape = space.shape
        self.action_space = gym.spaces.Box(
            np.tile(space.low.reshape(-1), self.chunk),
            np.tile(space.high.reshape(-1), self.chunk),
            dtype=space.dtype,
        )
        fps = env.metadata.get("render_fps")
        if fps:  # one step of the chunked env lasts ``chunk`` steps of the env
            self.metadata = {**env.metadata, "render_fps": float(fps) / self.chunk}

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Play the chunk's actions in order (see the class docstring)."""
        actions = np.asarray(action).reshape(self.chunk, *self._single_shape)
        # envs that can skip making observations (rendering) of the chunk's inner steps
        skip = getattr(self.env, "step_without_observation", None)
        total = 0.0
        succeeded: bool | None = None
        played = 0
        obs: Any = None
        for i, single in enumerate(actions):
            if skip is not None and i < self.chunk - 1:
                reward, terminated, truncated, info = skip(single)
            else:
                obs, reward, terminated, truncated, info = self.env.step(single)
            total += float(reward)
            played += 1
            if "success" in info:
                succeeded = bool(succeeded) or bool(info["success"])
            if terminated or truncated:
                break
        if obs is None:
            obs = self.env.current_observation()
        info = {**info, "chunk_steps": played}
        if succeeded is not None:
            info["success"] = float(succeeded)
        return obs, total, terminated, truncated, info
