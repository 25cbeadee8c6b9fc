"""Env registry: ``register_env(env_type, factory)``; ``gym`` wraps ``gymnasium.make``.

Built-in env types beyond ``gym`` live in modules the registry imports on first use
(``metaworld``: :mod:`rl_core.envs.metaworld_registration`, which imports Meta-World
itself only when an env is made or a config checked; ``maniskill`` and ``libero`` alike).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rl_core.registry import Registry

#: Factory signature: ``factory(env_cfg, render_mode=None) -> gymnasium.Env`` (one env).
EnvFactory = Callable[..., gym.Env]
#: ``check(env_cfg)``: raises :class:`EnvConfigError` for settings its env type cannot play.
EnvConfigCheck = Callable[[Any], None]

#: Modules registering the built-in env types besides ``gym`` (imported on first use).
BUILTIN_ENV_MODULES = (
    "rl_core.envs.metaworld_registration",
    "rl_core.envs.maniskill_registration",
    "rl_core.envs.libero_registration",
)
#: Batched factory signature: ``factory(env_cfg, num_envs, device) -> gymnasium VectorEnv``
#: (the simulator's own vectorization, e.g. ManiSkill3's GPU backend).
BatchedEnvFactory = Callable[..., gym.vector.VectorEnv]
ENVS: Registry[EnvFactory] = Registry("env type", BUILTIN_ENV_MODULES)
BATCHED_ENVS: Registry[BatchedEnvFactory] = Registry("batched env type", BUILTIN_ENV_MODULES)
ENV_CONFIG_CHECKS: Registry[EnvConfigCheck] = Registry("env config check", BUILTIN_ENV_MODULES)


class EnvConfigError(ValueError):
    """A setting of the ``env`` section its env type cannot play.

    Args:
        field: Path of the field inside the ``env`` section, e.g. ``("manipulation",
            "tasks", 0)``.
        value: The bad value.
        message: What is wrong and what is allowed.
    """

    def __init__(self, field: tuple[str | int, ...], value: Any, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.message = message


@dataclass(frozen=True)
class EnvSpaces:
    """Single-env observation and action spaces handed to model builders."""

    observation_space: gym.Space
    action_space: gym.Space


def register_env(
    env_type: str,
    factory: EnvFactory | None = None,
    *,
    force: bool = False,
    check: EnvConfigCheck | None = None,
) -> Any:
    """Register an env factory (call form or decorator form).

    Args:
        env_type: Name used as ``env.env_type`` (case-insensitive).
        factory: ``factory(env_cfg, render_mode=None) -> gymnasium.Env``; omit to decorate.
        force: Replace an existing registration.
        check: ``check(env_cfg)``, run when a config with this env type is validated; raises
            :class:`EnvConfigError` for settings the env type cannot play.
    """
    if check is not None:
        ENV_CONFIG_CHECKS.register(env_type, check, force=force)
    if factory is None:
        return ENVS.decorator(env_type, force=force)
    return ENVS.register(env_type, factory, force=force)


def register_batched_env(
    env_type: str, factory: BatchedEnvFactory, *, force: bool = False
) -> BatchedEnvFactory:
    """Register the simulator's own vectorization of ``env_type`` (``env.vectorization``).

    Args:
        env_type: A registered env type.
        factory: ``factory(env_cfg, num_envs, device) -> gymnasium.vector.VectorEnv`` with
            same-step autoreset, the spaces of the env type's single envs and gymnasium's
            ``info`` layout; ``device`` is the env worker's torch device (``cuda:0``,
            ``cpu``). Raise ``ValueError`` when the device cannot run it.
        force: Replace an existing registration.
    """
    return BATCHED_ENVS.register(env_type, factory, force=force)


def has_batched_env(env_type: str) -> bool:
    """Whether ``env_type`` registered its own vectorization (:func:`register_batched_env`)."""
    return env_type in BATCHED_ENVS


def make_batched_envs(env_cfg: Any, num_envs: int, device: str) -> gym.vector.VectorEnv:
    """``num_envs`` envs of ``env_cfg`` in the env type's own vectorization on ``device``."""
    return BATCHED_ENVS.get(env_cfg.env_type)(env_cfg, num_envs, device)


def check_env_config(env_cfg: Any) -> None:
    """Run the config check of ``env_cfg.env_type``, if it registered one.

    Raises:
        EnvConfigError: A setting the env type cannot play.
    """
    if env_cfg.env_type in ENV_CONFIG_CHECKS:
        ENV_CONFIG_CHECKS.get(env_cfg.env_type)(env_cfg)


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
