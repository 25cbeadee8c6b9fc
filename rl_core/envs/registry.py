"""Env registry: ``register_env(env_type, factory)``; ``gym`` wraps ``gymnasium.make``."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rl_core.registry import Registry

#: Factory signature: ``factory(env_cfg, render_mode=None) -> gymnasium.Env`` (one env).
EnvFactory = Callable[..., gym.Env]

ENVS: Registry[EnvFactory] = Registry("env type")


@dataclass(frozen=True)
class EnvSpaces:
    """Single-env observation and action spaces handed to model builders."""

    observation_space: gym.Space
    action_space: gym.Space


def register_env(env_type: str, factory: EnvFactory | None = None, *, force: bool = False) -> Any:
    """Register an env factory (call form or decorator form).

    Args:
        env_type: Name used as ``env.env_type`` (case-insensitive).
        factory: ``factory(env_cfg, render_mode=None) -> gymnasium.Env``; omit to decorate.
        force: Replace an existing registration.
    """
    if factory is None:
        return ENVS.decorator(env_type, force=force)
    return ENVS.register(env_type, factory, force=force)


def get_env_factory(env_type: str) -> EnvFactory:
    """Look up a registered env factory (error lists the known types)."""
    return ENVS.get(env_type)


def check_gym_id(env_id: str) -> None:
    """Raise ``ValueError`` with close matches if ``env_id`` is not a gymnasium id."""
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"{env_id!r} is not a registered gymnasium env id{hint} (custom ids must be registered "
        "with gymnasium.register, e.g. in the module named by RLPIPE_EXT_MODULE)"
    )


def make_gym_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Factory of ``env_type: gym``: ``gymnasium.make(env_cfg.env_id, **env_cfg.kwargs)``."""
    check_gym_id(env_cfg.env_id)
    kwargs = dict(env_cfg.kwargs)
    if env_cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env_cfg.max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    return gym.make(env_cfg.env_id, **kwargs)


def make_single_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Build one env through the registry."""
    return get_env_factory(env_cfg.env_type)(env_cfg, render_mode=render_mode)


def probe_spaces(env_cfg: Any) -> EnvSpaces:
    """Build one env of ``env_cfg`` to read its spaces, then close it."""
    env = make_single_env(env_cfg)
    try:
        return EnvSpaces(env.observation_space, env.action_space)
    finally:
        env.close()


register_env("gym", make_gym_env)
