"""Observations shared by the manipulation env types (``metaworld``, ``maniskill``, ``libero``).

Every manipulation env observes in one of three modes (``env.manipulation.obs_mode``):

- ``state``: ``Box(D,)`` float32, the simulator's state;
- ``rgb``: ``Dict(main_images=Box(0, 255, (S, S, 3), uint8), task_descriptions=Text)``:
  a camera image and the task's instruction;
- ``rgb+state``: both, the state under ``states``.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.action_chunk import ActionChunk
from rl_core.envs.registry import EnvConfigError

#: Characters of the instructions (the ``Text`` space of ``task_descriptions``).
INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " ,.-'"
MAX_INSTRUCTION_LENGTH = 128
OBS_MODES = ("state", "rgb", "rgb+state")


def observation_space(obs_mode: str, state_dim: int, image_size: int) -> gym.spaces.Space:
    """The observation space of ``obs_mode`` (module docstring).

    Args:
        obs_mode: ``state``, ``rgb`` or ``rgb+state``.
        state_dim: Length of the state vector.
        image_size: Side of the square camera image.
    """
    states = gym.spaces.Box(-np.inf, np.inf, (state_dim,), np.float32)
    if obs_mode == "state":
        return states
    spaces: dict[str, gym.spaces.Space] = {
        "main_images": gym.spaces.Box(0, 255, (image_size, image_size, 3), np.uint8),
        "task_descriptions": gym.spaces.Text(
            MAX_INSTRUCTION_LENGTH, min_length=1, charset=INSTRUCTION_CHARSET
        ),
    }
    if obs_mode == "rgb+state":
        spaces["states"] = states
    return gym.spaces.Dict(spaces)


def observation(
    obs_mode: str, state: np.ndarray, image: Callable[[], np.ndarray], instruction: str
) -> Any:
    """An observation of ``obs_mode``; ``image()`` is called only in the camera modes."""
    if obs_mode == "state":
        return state
    obs = {"main_images": image(), "task_descriptions": instruction}
    if obs_mode == "rgb+state":
        obs["states"] = state
    return obs


def refuse_kwargs(env_cfg: Any) -> None:
    """Config check: manipulation env types read ``env.manipulation``, not ``env.kwargs``.

    Raises:
        EnvConfigError: Naming ``kwargs``.
    """
    if env_cfg.kwargs:
        raise EnvConfigError(
            ("kwargs",),
            env_cfg.kwargs,
            f"env_type {env_cfg.env_type} reads its settings from env.manipulation, not env.kwargs",
        )


def refuse_suite(env_cfg: Any) -> None:
    """Config check: only ``env_type: libero`` has suites (``env.manipulation.suite``).

    Raises:
        EnvConfigError: Naming ``manipulation.suite``.
    """
    suite = env_cfg.manipulation.suite
    if suite is not None:
        raise EnvConfigError(
            ("manipulation", "suite"),
            suite,
            f"suite is a LIBERO setting (env_type libero); env_type {env_cfg.env_type} has "
            "none: leave it unset",
        )


def chunked(env: gym.Env, action_chunk: int) -> gym.Env:
    """``env`` playing ``action_chunk`` actions per step (unchanged for 1)."""
    return ActionChunk(env, action_chunk) if action_chunk > 1 else env
