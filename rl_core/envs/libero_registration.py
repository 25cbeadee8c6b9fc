"""Registration of the env type ``libero``: its factory and config check.

The env registry (:mod:`rl_core.envs.registry`) imports this module on first use; LIBERO
itself is imported only when an env is made or a config checked.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rl_core.envs.libero_env import CAMERAS, DEFAULT_CAMERA, LiberoEnv
from rl_core.envs.libero_suites import (
    DEFAULT_SUITE,
    INSTALL_HINT,
    SUITE_EPISODE_STEPS,
    resolve_task,
    state_size,
    suite_message,
    suite_task,
    suite_task_names,
)
from rl_core.envs.manipulation_obs import chunked, refuse_kwargs
from rl_core.envs.registry import EnvConfigError, register_env


def make_libero_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Factory of ``env_type: libero`` (settings in ``env.manipulation``).

    Args:
        env_cfg: The ``env`` section.
        render_mode: None or ``rgb_array``.

    Returns:
        A :class:`LiberoEnv`, wrapped in :class:`ActionChunk` when
        ``manipulation.action_chunk`` is above 1.
    """
    m = env_cfg.manipulation
    env: gym.Env = LiberoEnv(
        suite=m.suite or DEFAULT_SUITE,
        tasks=m.tasks,
        obs_mode=m.obs_mode,
        image_size=m.image_size,
        camera=m.camera or DEFAULT_CAMERA,
        render_size=m.render_size,
        reward=m.reward or "success",
        terminate_on_success=m.terminate_on_success,
        reset_on_success=m.reset_on_success,
        max_episode_steps=env_cfg.max_episode_steps,
        render_mode=render_mode,
    )
    return chunked(env, m.action_chunk)


def check_libero_config(env_cfg: Any) -> None:
    """Config check of ``env_type: libero``: LIBERO installed, suite, tasks and settings.

    Args:
        env_cfg: The ``env`` section.

    Raises:
        EnvConfigError: Naming the field (``env_type``, ``manipulation.suite``,
            ``manipulation.tasks[.<i>]``, ``manipulation.camera``, ``manipulation.reward``,
            ``manipulation.control_mode``, ``manipulation.fast_render`` or ``kwargs``).
    """
    m = env_cfg.manipulation
    refuse_kwargs(env_cfg)
    suite = m.suite or DEFAULT_SUITE
    if suite not in SUITE_EPISODE_STEPS:
        raise EnvConfigError(("manipulation", "suite"), m.suite, suite_message(suite))
    for field, value, allowed, why in (
        ("control_mode", m.control_mode, (None,), "LIBERO has one controller: leave it unset"),
        (
            "reward",
            m.reward,
            (None, "success"),
            "LIBERO's reward is its success: set success or leave it unset",
        ),
        ("fast_render", m.fast_render, (True,), "a Meta-World setting: leave it true"),
        ("camera", m.camera, (None, *CAMERAS), f"allowed cameras: {', '.join(CAMERAS)}"),
    ):
        if value not in allowed:
            raise EnvConfigError(("manipulation", field), value, f"env_type libero: {why}")
    try:
        suite_task_names(suite)
    except ImportError:
        raise EnvConfigError(
            ("env_type",), env_cfg.env_type, f"env_type libero needs LIBERO: {INSTALL_HINT}"
        ) from None
    indices = []
    for i, task in enumerate(m.tasks):
        try:
            indices.append(resolve_task(suite, task))
        except ValueError as exc:
            raise EnvConfigError(("manipulation", "tasks", i), task, str(exc)) from None
    if len(set(indices)) < len(indices):
        raise EnvConfigError(
            ("manipulation", "tasks"), m.tasks, "a task is listed twice (by name and by index)"
        )
    if m.obs_mode == "state":
        try:
            state_size([suite_task(suite, i) for i in indices])
        except ValueError as exc:
            raise EnvConfigError(("manipulation", "tasks"), m.tasks, str(exc)) from None


register_env("libero", make_libero_env, check=check_libero_config)
