"""Registration of the env type ``metaworld``: its factory, config check and scripted expert.

The env registry (:mod:`rl_core.envs.registry`) and the expert registry
(:mod:`rl_core.envs.experts`) import this module on first use.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.experts import register_expert
from rl_core.envs.manipulation_obs import chunked, refuse_kwargs, refuse_suite
from rl_core.envs.metaworld_benchmark import INSTALL_HINT, MAX_PATH_LENGTH, metaworld_task_names
from rl_core.envs.metaworld_env import CAMERAS, DEFAULT_CAMERA, MetaWorldEnv
from rl_core.envs.metaworld_instructions import unknown_task_message
from rl_core.envs.registry import EnvConfigError, register_env


def make_metaworld_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Factory of ``env_type: metaworld`` (settings in ``env.manipulation``).

    Args:
        env_cfg: The ``env`` section.
        render_mode: None or ``rgb_array``.

    Returns:
        A :class:`MetaWorldEnv`, wrapped in :class:`ActionChunk` when
        ``manipulation.action_chunk`` is above 1.
    """
    m = env_cfg.manipulation
    env: gym.Env = MetaWorldEnv(
        tasks=m.tasks,
        obs_mode=m.obs_mode,
        image_size=m.image_size,
        camera=m.camera or DEFAULT_CAMERA,
        render_size=m.render_size,
        fast_render=m.fast_render,
        reward=m.reward or "dense",
        terminate_on_success=m.terminate_on_success,
        reset_on_success=m.reset_on_success,
        max_episode_steps=env_cfg.max_episode_steps or MAX_PATH_LENGTH,
        render_mode=render_mode,
    )
    return chunked(env, m.action_chunk)


def check_metaworld_config(env_cfg: Any) -> None:
    """Config check of ``env_type: metaworld``: Meta-World installed, task and camera names.

    Args:
        env_cfg: The ``env`` section.

    Raises:
        EnvConfigError: Naming the field (``env_type``, ``manipulation.tasks.<i>``,
            ``manipulation.camera`` or ``kwargs``).
    """
    m = env_cfg.manipulation
    refuse_kwargs(env_cfg)
    refuse_suite(env_cfg)
    try:
        known = metaworld_task_names()
    except ImportError:
        raise EnvConfigError(
            ("env_type",), env_cfg.env_type, f"env_type metaworld needs Meta-World: {INSTALL_HINT}"
        ) from None
    for i, task in enumerate(m.tasks):
        if task not in known:
            raise EnvConfigError(
                ("manipulation", "tasks", i), task, unknown_task_message(task, known)
            )
    if m.control_mode is not None:
        raise EnvConfigError(
            ("manipulation", "control_mode"),
            m.control_mode,
            "Meta-World has one controller (hand motion and gripper): leave control_mode unset",
        )
    if m.camera is not None and m.camera not in CAMERAS:
        raise EnvConfigError(
            ("manipulation", "camera"),
            m.camera,
            f"unknown Meta-World camera {m.camera!r}; allowed: {', '.join(CAMERAS)}",
        )


def play_metaworld_expert(env: gym.Env, obs: Any, info: dict[str, Any]) -> np.ndarray:
    """The scripted expert of ``env_type: metaworld`` (``rlpipe demos``): the env's action.

    Reads the simulator, not ``obs``, so it drives pixel observations too; with action
    chunks it returns a whole chunk (:meth:`MetaWorldEnv.expert_actions`).

    Args:
        env: A :class:`MetaWorldEnv`, possibly wrapped (in :class:`ActionChunk`).
        obs: The observation (unused).
        info: The step's info (unused).

    Returns:
        The flat env action: ``action_chunk`` x 4 numbers.

    Raises:
        TypeError: ``env`` is not a Meta-World env.
    """
    base = env.unwrapped
    if not isinstance(base, MetaWorldEnv):
        raise TypeError(f"the metaworld expert needs a MetaWorldEnv, got {type(base).__name__}")
    count = int(np.prod(env.action_space.shape)) // 4
    return base.expert_actions(count).reshape(-1)


register_env("metaworld", make_metaworld_env, check=check_metaworld_config)
register_expert("metaworld", play_metaworld_expert)
