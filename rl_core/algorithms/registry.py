"""Registries for advantage estimators and policy losses.

An advantage estimator is a function called with keyword arguments only and returning
``(advantages, returns)``; it must accept and ignore unknown keywords (``**_``) so one call
site can serve every estimator. A policy loss is likewise keyword-only and returns
``(loss, metrics)`` where ``metrics`` maps names to Python floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

import torch

from rl_core.registry import Registry

AdvantageFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
PolicyLossFn = Callable[..., tuple[torch.Tensor, dict[str, float]]]

F = TypeVar("F", bound=Callable[..., Any])

#: The built-ins register when the ``rl_core.algorithms`` package is imported (its
#: ``__init__`` imports every algorithm module, in an order that suits their imports).
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", "rl_core.algorithms")
POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss", "rl_core.algorithms")


@overload
def register_advantage(name: str, fn: None = None, *, force: bool = False) -> Callable[[F], F]: ...


@overload
def register_advantage(name: str, fn: F, *, force: bool = False) -> F: ...


def register_advantage(
    name: str, fn: F | None = None, *, force: bool = False
) -> F | Callable[[F], F]:
    """Register an advantage estimator, as a decorator or directly.

    Examples:
        ``@register_advantage("gae")`` above a function, or
        ``register_advantage("my_adv", my_fn)``.

    Args:
        name: Name (case-insensitive).
        fn: The estimator; omit it to get a decorator.
        force: Replace an existing registration instead of raising.

    Returns:
        ``fn`` itself when given, otherwise a decorator that registers and returns its argument.

    Raises:
        RegistryError: ``name`` is already taken by another function and ``force`` is False.
    """
    if fn is None:
        return ADVANTAGES.decorator(name, force=force)  # type: ignore[return-value]
    return ADVANTAGES.register(name, fn, force=force)  # type: ignore[return-value]


@overload
def register_policy_loss(
    name: str, fn: None = None, *, force: bool = False
) -> Callable[[F], F]: ...


@overload
def register_policy_loss(name: str, fn: F, *, force: bool = False) -> F: ...


def register_policy_loss(
    name: str, fn: F | None = None, *, force: bool = False
) -> F | Callable[[F], F]:
    """Register a policy loss, as a decorator or directly.

    Examples:
        ``@register_policy_loss("ppo")`` above a function, or
        ``register_policy_loss("my_loss", my_fn)``.

    Args:
        name: Name (case-insensitive).
        fn: The loss function; omit it to get a decorator.
        force: Replace an existing registration instead of raising.

    Returns:
        ``fn`` itself when given, otherwise a decorator that registers and returns its argument.

    Raises:
        RegistryError: ``name`` is already taken by another function and ``force`` is False.
    """
    if fn is None:
        return POLICY_LOSSES.decorator(name, force=force)  # type: ignore[return-value]
    return POLICY_LOSSES.register(name, fn, force=force)  # type: ignore[return-value]


def get_advantage(name: str) -> AdvantageFn:
    """Return the advantage estimator registered as ``name`` (case-insensitive).

    Args:
        name: Registered name, e.g. ``"gae"`` or ``"grpo"``.

    Returns:
        The estimator function.

    Raises:
        RegistryError: Unknown name; the message lists the known ones.
    """
    return ADVANTAGES.get(name)


def get_policy_loss(name: str) -> PolicyLossFn:
    """Return the policy loss registered as ``name`` (case-insensitive).

    Args:
        name: Registered name, e.g. ``"ppo"``.

    Returns:
        The loss function.

    Raises:
        RegistryError: Unknown name; the message lists the known ones.
    """
    return POLICY_LOSSES.get(name)
