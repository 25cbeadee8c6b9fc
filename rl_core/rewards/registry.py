"""Reward registry: ``register_reward(name, cls_or_fn)``."""

from __future__ import annotations

from typing import Any

from rl_core.registry import Registry

REWARDS: Registry[Any] = Registry("reward")


def register_reward(name: str, cls_or_fn: Any = None, *, force: bool = False) -> Any:
    """Register a reward class or function (call or decorator form)."""
    if cls_or_fn is None:
        return REWARDS.decorator(name, force=force)
    return REWARDS.register(name, cls_or_fn, force=force)


def get_reward(name: str) -> Any:
    """Look up a registered reward (built-ins are loaded first)."""
    import rl_core.builtins  # noqa: F401 - registers the built-in rewards

    return REWARDS.get(name)
