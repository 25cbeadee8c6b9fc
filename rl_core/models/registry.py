"""Model registry: ``register_model(model_type, builder, category)`` and ``get_model``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rl_core.models.base_policy import BasePolicy
from rl_core.registry import Registry

#: Builder signature: ``builder(model_cfg, spaces) -> BasePolicy`` where ``spaces`` has
#: ``observation_space`` and ``action_space`` (single-env gymnasium spaces).
ModelBuilder = Callable[[Any, Any], BasePolicy]
#: Built-in categories; an extension may add its own (with a runtime registered for it).
CATEGORIES = ("embodied", "reasoning", "reward_model")
_CATEGORY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: its builder and category."""

    builder: ModelBuilder
    category: str

    def __repr__(self) -> str:
        name = getattr(self.builder, "__qualname__", repr(self.builder))
        return f"{getattr(self.builder, '__module__', '?')}.{name} ({self.category})"


#: Built-in models register when these modules are imported (on first use of the registry).
MODELS: Registry[ModelSpec] = Registry(
    "model type",
    (
        "rl_core.models.mlp_actor_critic",
        "rl_core.models.pixel_actor_critic",
        "rl_core.models.sac_policy",
        "rl_core.models.iql_policy",
        "rl_core.models.vla_oft",
        "rl_core.models.hf_builder",
    ),
)


def register_model(
    model_type: str,
    builder: ModelBuilder | None = None,
    category: str = "embodied",
    force: bool = False,
) -> Any:
    """Register a model builder under ``model_type`` (call or decorator form).

    Examples:
        ``register_model("my_cnn", build_my_cnn, "embodied")``, or above a builder
        function or a :class:`BasePolicy` subclass whose ``__init__`` takes
        ``(model_cfg, spaces)``: ``@register_model("my_cnn", category="embodied")``.

    Args:
        model_type: Name used as ``model.model_type`` in configs (case-insensitive).
        builder: ``builder(model_cfg, spaces) -> BasePolicy``; omit it to get a decorator.
        category: The kind of training that trains it: ``"embodied"``, ``"reasoning"``,
            ``"reward_model"``, or a kind a package registers (:func:`rl_core.kind.register_kind`).
        force: Replace an existing registration (e.g. to swap a built-in).

    Returns:
        ``builder`` when given, otherwise a decorator that registers and returns its argument.

    Raises:
        ValueError: A category name that is not a lowercase identifier.
        rl_core.registry.RegistryError: Name taken and ``force`` is False.
    """
    if not _CATEGORY_NAME.match(category):
        raise ValueError(
            f"category must be a lowercase identifier such as {CATEGORIES}, got {category!r}"
        )
    if builder is None:

        def wrap(fn: ModelBuilder) -> ModelBuilder:
            MODELS.register(model_type, ModelSpec(fn, category), force=force)
            return fn

        return wrap
    MODELS.register(model_type, ModelSpec(builder, category), force=force)
    return builder


def get_model(model_cfg: Any, spaces: Any) -> BasePolicy:
    """Build the policy named by ``model_cfg.model_type``.

    Raises:
        rl_core.registry.RegistryError: Unknown model type (lists the known ones).
        TypeError: The builder did not return a :class:`BasePolicy`.
    """
    spec = MODELS.get(model_cfg.model_type)
    model = spec.builder(model_cfg, spaces)
    if not isinstance(model, BasePolicy):
        raise TypeError(
            f"builder of model type {model_cfg.model_type!r} returned {type(model).__name__}, "
            "which is not a rl_core.models.BasePolicy"
        )
    return model
