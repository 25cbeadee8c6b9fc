"""Shared pieces of the config schema: the section base class and field checks."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError


class Section(BaseModel):
    """A config section: unknown keys are rejected, assignments validated, floats finite."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


def check_finite_tree(value: Any) -> Any:
    """Validate that every float inside ``value`` (nested dicts, lists, tuples) is finite.

    For free-form fields (``env.kwargs``, extra ``model`` keys) whose values pydantic does
    not type; the error names the nested key of the first bad number.
    """
    bad = _first_nonfinite(value, "")
    if bad is not None:
        path, number = bad
        where = f" at {path}" if path else ""
        raise ValueError(f"numbers must be finite; found {number}{where}")
    return value


def _first_nonfinite(value: Any, path: str) -> tuple[str, float] | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if isinstance(value, dict):
        items = ((f"{path}[{k!r}]", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for child_path, child in items:
        bad = _first_nonfinite(child, child_path)
        if bad is not None:
            return bad
    return None


def field_error(
    title: str, field: tuple[str | int, ...], value: Any, message: str
) -> ValidationError:
    """A validation error located at ``field`` inside the model being validated.

    Raised from a model validator, its location is the section's path plus ``field`` (e.g.
    ``env.manipulation.tasks.0``), where a ``ValueError`` would name only the section.
    """
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    return ValidationError.from_exception_data(
        title, [InitErrorDetails(type=error, loc=field, input=value)]
    )


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


def check_registered_name(kind: str, name: str) -> str:
    """Validate ``name`` against the registry of ``kind``; return its canonical form.

    The canonical form is the lower-case name (fields compared with built-in names after
    validation, like ``rollout.engine == "vllm"``); an unknown name's error lists the
    registered ones, quoted.
    """
    from rl_core.registries import registry_for
    from rl_core.registry import EXT_MODULE_HINT, Registry

    registry = registry_for(kind)
    if name not in registry:
        allowed = ", ".join(repr(n) for n in registry.names())
        raise ValueError(f"unknown {registry.kind} {name!r}; allowed: {allowed}. {EXT_MODULE_HINT}")
    return Registry.normalize(name)


def check_reward_components(value: dict[str, float]) -> dict[str, float]:
    """Validate ``reward.components``: registered, non-composite names.

    The weights are floats of a :class:`Section`, so pydantic already rejects inf and NaN.
    """
    for name in value:
        check_registered("reward", name)
        if name.strip().lower() == "composite":
            raise ValueError("a composite reward cannot contain 'composite' (a cycle)")
    return value


def check_regex(value: str) -> str:
    """Validate that ``value`` compiles as a regular expression."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value
