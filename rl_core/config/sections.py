"""Shared pieces of the config schema: the section base class and field checks."""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: unknown keys are rejected, assignments validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def check_registered(kind: str, name: str) -> str:
    """Validate ``name`` against the registry of ``kind`` (imported lazily)."""
    from rl_core.registries import registry_for
    from rl_core.registry import RegistryError

    try:
        registry_for(kind).get(name)
    except RegistryError as exc:
        # pydantic only turns ValueError into a validation error; RegistryError is a KeyError.
        raise ValueError(str(exc)) from None
    return name


def check_reward_components(value: dict[str, float]) -> dict[str, float]:
    """Validate ``reward.components``: registered, non-composite names and finite weights."""
    for name, weight in value.items():
        check_registered("reward", name)
        if name.strip().lower() == "composite":
            raise ValueError("a composite reward cannot contain 'composite' (a cycle)")
        if not math.isfinite(weight):
            raise ValueError(f"weight of {name!r} must be finite, got {weight}")
    return value


def check_regex(value: str) -> str:
    """Validate that ``value`` compiles as a regular expression."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value
