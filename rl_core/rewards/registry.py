"""Reward registry: ``register_reward(name, cls_or_fn)`` and :func:`build_reward`.

A reward is either

* a **function** called as ``fn(rewards=..., scale=..., **fields)`` returning the new
  per-step rewards (a numpy array shaped like ``rewards``), or
* a **class** constructed once per worker as ``cls(reward_cfg)`` (the ``reward`` config
  section) whose instances are called like the function form.

Both must accept and ignore keywords they do not use (``**_``): the caller passes every
field it has, and later callers (reasoning rewards) pass more of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_core.registry import Registry

#: The built-ins register when the ``rl_core.rewards`` package is imported (its ``__init__``
#: imports the modules that define them).
REWARDS: Registry[Any] = Registry("reward", "rl_core.rewards")
RewardFn = Callable[..., Any]


def register_reward(name: str, cls_or_fn: Any = None, *, force: bool = False) -> Any:
    """Register a reward class or function (call or decorator form).

    Args:
        name: Name used as ``reward.reward_type`` (case-insensitive).
        cls_or_fn: The reward function or class (see the module docstring); omit it to
            get a decorator.
        force: Replace an existing registration (e.g. swap the built-in ``env``).

    Returns:
        ``cls_or_fn`` when given, otherwise a decorator registering its argument.

    Raises:
        rl_core.registry.RegistryError: ``name`` is taken and ``force`` is False.
    """
    if cls_or_fn is None:
        return REWARDS.decorator(name, force=force)
    return REWARDS.register(name, cls_or_fn, force=force)


def get_reward(name: str) -> Any:
    """Look up a registered reward (built-ins are loaded first)."""
    return REWARDS.get(name)


def build_reward(reward_cfg: Any) -> RewardFn:
    """The callable for ``reward_cfg.reward_type``: a function as is, a class instantiated.

    Args:
        reward_cfg: The ``reward`` config section.

    Raises:
        rl_core.registry.RegistryError: Unknown reward type.
        TypeError: A registered class whose instances are not callable.
    """
    entry = get_reward(reward_cfg.reward_type)
    if not isinstance(entry, type):
        return entry
    instance = entry(reward_cfg)
    if not callable(instance):
        raise TypeError(
            f"reward class {entry.__module__}.{entry.__qualname__} (reward_type "
            f"{reward_cfg.reward_type!r}) must define __call__(rewards=..., scale=..., **_)"
        )
    return instance
