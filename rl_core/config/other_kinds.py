"""Say which kind of training reads a field that this run's kind refused.

Each kind's config class holds only the fields that kind reads (pydantic refuses the
rest). When a refused field belongs to another registered kind, the error says so, e.g.
``env.num_envs: read by embodied runs only; this run's model (hf_causal_lm) is reasoning``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rl_core.kind import KINDS, kind_named


def _section_class(schema: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    model: type[BaseModel] = schema
    for part in path:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _readers(schema: type[BaseModel], path: list[str]) -> list[str]:
    """Other registered kinds whose config has the field at ``path``."""
    kind_named("embodied")  # the built-in kinds are registered
    readers = []
    for name in KINDS.names():
        other = KINDS.get(name).config
        if other is schema:
            continue
        section = _section_class(other, path[:-1])
        if section is not None and path[-1] in section.model_fields:
            readers.append(name)
    # a kind refining a reader reads the field as that reader does: name the reader alone
    return [name for name in readers if KINDS.get(name).refines not in readers]


def _this_run(schema: type[BaseModel], data: dict[str, Any]) -> str:
    model = data.get("model")
    model_type = model.get("model_type") if isinstance(model, dict) else None
    model_type = model_type or schema.model_fields["model"].default_factory().model_type
    return f"this run's model ({model_type}) is {getattr(schema, 'kind_name', '?')}"


def read_by_other_kinds(schema: type[BaseModel], loc: list[str], data: dict[str, Any]) -> list[str]:
    """Error lines for a refused field (or whole section) that another kind reads.

    Args:
        schema: This run's config class.
        loc: Where pydantic found the unknown key (``["env"]``, ``["rollout", "engine"]``).
        data: What the user wrote.

    Returns:
        One line per field (a section's written fields each), or [] when no other kind
        reads it.
    """
    readers = _readers(schema, loc)
    if not readers:
        return []
    written = data.get(loc[0]) if len(loc) == 1 else None
    fields = [f"{loc[0]}.{name}" for name in written] if isinstance(written, dict) else []
    fields = fields or [".".join(loc)]
    who, this = " and ".join(readers), _this_run(schema, data)
    return [f"  {field}: read by {who} runs only; {this}" for field in fields]


def extra_fields_of_other_kinds(cfg: Any) -> list[str]:
    """Extra ``model`` keys (kept for custom models) that are another kind's fields."""
    extra = cfg.model.model_extra or {}
    schema = type(cfg)
    lines = []
    for name in sorted(extra):
        readers = _readers(schema, ["model", name])
        if readers:
            lines.append(
                f"model.{name}: read by {' and '.join(readers)} runs only; this run's model "
                f"({cfg.model.model_type}) is {cfg.category}"
            )
    return lines


def _default_of(schema: type[BaseModel], section: str, name: str) -> Any:
    part = _section_class(schema, [section])
    field = part.model_fields[name] if part is not None else None
    if field is None:
        raise KeyError(name)
    default = field.get_default(call_default_factory=True)
    return default.model_dump(mode="json") if isinstance(default, BaseModel) else default


def without_other_kinds_defaults(schema: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` less the fields this kind lacks that hold another kind's default value.

    A preset of one kind may spell out its defaults (``env.num_envs: 8``); run as another
    kind (``model.model_type=hf_causal_lm``) they change nothing, so they are not refused.
    """
    kept: dict[str, Any] = {}
    for section, written in data.items():
        if not isinstance(written, dict) or section not in schema.model_fields:
            if not isinstance(written, dict) or not _only_defaults(schema, section, written):
                kept[section] = written
            continue
        own = _section_class(schema, [section])
        kept[section] = {
            name: value
            for name, value in written.items()
            if own is None
            or name in own.model_fields
            or own.model_config.get("extra") == "allow"
            and not _readers(schema, [section, name])
            or not _is_others_default(schema, section, name, value)
        }
    return kept


def _is_others_default(schema: type[BaseModel], section: str, name: str, value: Any) -> bool:
    for reader in _readers(schema, [section, name]):
        try:
            if _default_of(KINDS.get(reader).config, section, name) == value:
                return True
        except KeyError:
            continue
    return False


def _only_defaults(schema: type[BaseModel], section: str, written: dict[str, Any]) -> bool:
    return all(_is_others_default(schema, section, name, value) for name, value in written.items())
