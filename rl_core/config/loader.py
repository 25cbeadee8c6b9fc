"""Load a config: YAML preset + dotted CLI overrides, validated by the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rl_core.config.other_kinds import (
    extra_fields_of_other_kinds,
    read_by_other_kinds,
    without_other_kinds_defaults,
)
from rl_core.config.policy_sections import ModelConfig
from rl_core.config.schema import RLPipeConfig
from rl_core.kind import kind_named, kind_of_written_config
from rl_core.registry import RegistryError

#: The presets shipped with rlpipe: package data of ``rl_core`` (a checkout also has them as
#: ``configs/``), so preset names resolve from any working directory and from a wheel.
PRESET_DIR = Path(__file__).resolve().parents[1] / "presets"
DEFAULT_PRESET = "ppo_cartpole"
#: Fields naming an input file: a relative path written in a YAML file names a file under the
#: working directory, or else one beside the YAML file (as the shipped presets' data are).
FILE_FIELDS: tuple[tuple[str, ...], ...] = (("replay", "offline_data"),)


class ConfigError(ValueError):
    """A configuration problem, with one line per offending field."""


def available_presets() -> list[str]:
    """Names of the YAML presets shipped with rlpipe (in :data:`PRESET_DIR`)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_preset_path(preset: str) -> Path:
    """Map a preset name or a YAML path to an existing file.

    Raises:
        ConfigError: Neither a known preset nor an existing file.
    """
    candidate = Path(preset)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    named = PRESET_DIR / f"{preset}.yaml"
    if named.is_file():
        return named
    raise ConfigError(
        f"config {preset!r} is neither a preset nor a YAML file; presets: "
        f"{', '.join(available_presets())}"
    )


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``"actor.lr=1e-3"`` into (["actor", "lr"], 0.001); the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.field=value")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {text!r} has an empty field name")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value is not valid YAML ({exc})") from None
    return path, value


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value`` creating nested dicts as needed."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def load_config(
    preset: str | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> RLPipeConfig:
    """Build the validated config of a run.

    Args:
        preset: Preset name (a file of :data:`PRESET_DIR`, from any working directory) or a
            YAML path; None = default preset.
        overrides: Dotted ``section.field=value`` strings applied after the preset.

    Returns:
        The validated config.

    Raises:
        ConfigError: Unknown preset, malformed YAML/override, or any schema violation; the
            message names each field, its value and what is allowed.
    """
    path, data = load_raw_config(preset, overrides)
    return validate_config(data, source=str(path))


def load_raw_config(
    preset: str | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[Path, dict[str, Any]]:
    """The preset's YAML with the overrides applied, not yet validated (see :func:`load_config`).

    Returns:
        The preset's path and the merged plain data.

    Raises:
        ConfigError: Unknown preset, malformed YAML or override.
    """
    path = resolve_preset_path(preset or DEFAULT_PRESET)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections")
    data.setdefault("preset", path.stem)
    resolve_file_fields(data, path.parent)
    for text in overrides:
        apply_override(data, *parse_override(text))
    return path, data


def resolve_file_fields(data: dict[str, Any], base: Path) -> None:
    """Point the :data:`FILE_FIELDS` of a YAML file's data at files beside it when needed.

    A relative path that names no file under the working directory but one under ``base``
    (the YAML file's folder) becomes that file's absolute path; any other value is kept.

    Args:
        data: The YAML file's plain data, changed in place.
        base: The folder of the YAML file.
    """
    for *section_path, field in FILE_FIELDS:
        node: Any = data
        for part in section_path:
            node = node.get(part) if isinstance(node, dict) else None
        value = node.get(field) if isinstance(node, dict) else None
        if not isinstance(value, str) or not value or Path(value).is_absolute():
            continue
        beside = base / value
        if not Path(value).is_file() and beside.is_file():
            node[field] = str(beside.resolve())


def config_class(data: dict[str, Any]) -> type[RLPipeConfig]:
    """The config class of the kind of training ``data`` describes.

    The kind is the category of ``model.model_type`` (its default when not written), or a
    kind refining it that selects ``data`` (:func:`rl_core.kind.kind_of_written_config`).
    An unknown model type picks the embodied class, whose validation then names the field.
    """
    model = data.get("model")
    written = model.get("model_type") if isinstance(model, dict) else None
    model_type = written if written is not None else ModelConfig.model_fields["model_type"].default
    try:
        return kind_of_written_config(data, model_type).config
    except RegistryError as exc:
        if "registered kind" in str(exc):  # a known model whose category has no kind
            raise ConfigError(f"invalid configuration:\n  {exc}") from None
        return kind_named("embodied").config
    except (AttributeError, TypeError):
        return kind_named("embodied").config


def validate_config(data: dict[str, Any], source: str = "config") -> RLPipeConfig:
    """Validate a plain dict against its kind's schema, raising :class:`ConfigError`."""
    schema = config_class(data)
    try:
        cfg = schema.model_validate(without_other_kinds_defaults(schema, data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, source, schema)) from None
    problems = extra_fields_of_other_kinds(cfg)
    if problems:
        lines = "\n  ".join(problems)
        raise ConfigError(f"invalid configuration ({source}):\n  {lines}")
    return cfg


def format_validation_error(
    exc: ValidationError,
    data: dict[str, Any],
    source: str,
    schema: type[BaseModel] = RLPipeConfig,
) -> str:
    """One readable line per error: field, bad value, what is allowed."""
    lines = [f"invalid configuration ({source}):"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        field = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines += read_by_other_kinds(schema, loc, data) or [
                f"  {field}: unknown field; allowed fields here: "
                f"{', '.join(_allowed_fields(schema, loc[:-1]))}"
            ]
            continue
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err["type"] == "value_error" and not loc:
            lines.append(f"  {msg}")
            continue
        shown = repr(err.get("input")) if "input" in err else "(missing)"
        lines.append(f"  {field} = {shown}: {msg}")
    return "\n".join(lines)


def _allowed_fields(schema: type[BaseModel], section_path: list[str]) -> list[str]:
    model = schema
    for part in section_path:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return sorted(model.model_fields)
