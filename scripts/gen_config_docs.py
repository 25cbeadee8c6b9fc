"""Generate docs/configuration.md from the config schema (rl_core/config/schema.py).

Usage:
    .venv/bin/python scripts/gen_config_docs.py           # (re)write docs/configuration.md
    .venv/bin/python scripts/gen_config_docs.py --check   # exit 1 if the file is stale

Everything in the page comes from the schema (``RLPipeConfig`` and its section models:
fields, annotations, ``Field`` constraints and descriptions), the registries, the presets in
``rl_core/presets/`` and the small tables in ``config_docs_tables.py`` (which ``render`` checks
against the schema, so a new validator or a renamed field fails loudly instead of leaving
the page wrong).
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "configuration.md"
REGEN_COMMAND = ".venv/bin/python scripts/gen_config_docs.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.config_docs_intro import INTRO  # noqa: E402 - needs ROOT on sys.path
from scripts.config_docs_presets import presets_table, table_cell  # noqa: E402 - needs ROOT on sys.path
from scripts.config_docs_tables import (  # noqa: E402 - needs ROOT on sys.path
    CROSS_FIELD_RULES,
    FALLBACK_DESCRIPTIONS,
    FIELD_VALIDATOR_NOTES,
    REGISTERED_FIELDS,
)
from scripts.generated_docs import write_or_check  # noqa: E402 - needs ROOT on sys.path

TABLES_FILE = "scripts/config_docs_tables.py"


class SchemaDocsError(RuntimeError):
    """The tables of this script no longer match the schema."""


# -- formatting helpers ----------------------------------------------------------------------


def type_name(annotation: Any) -> str:
    """Readable name of a field annotation (``int | None``, ``list[int]``, ``str``)."""
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "any"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        kinds = sorted({type(a).__name__ for a in args})
        return " | ".join(kinds)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def format_value(value: Any) -> str:
    """A default as YAML/JSON-style text (what you would write in a preset or override)."""
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value)


def _literal_args(annotation: Any) -> list[Any]:
    """Values allowed by a ``Literal`` (also inside ``Literal | None``)."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [v for a in typing.get_args(annotation) for v in _literal_args(a)]
    return []


def constraint_text(field: FieldInfo) -> list[str]:
    """Range and length constraints from ``Field(...)`` metadata."""
    parts: list[str] = []
    for meta in field.metadata:
        if isinstance(meta, at.Gt):
            parts.append(f"> {format_value(meta.gt)}")
        elif isinstance(meta, at.Ge):
            parts.append(f"≥ {format_value(meta.ge)}")
        elif isinstance(meta, at.Lt):
            parts.append(f"< {format_value(meta.lt)}")
        elif isinstance(meta, at.Le):
            parts.append(f"≤ {format_value(meta.le)}")
        elif isinstance(meta, at.MinLen):
            parts.append(f"length ≥ {meta.min_length}")
        elif isinstance(meta, at.MaxLen):
            parts.append(f"length ≤ {meta.max_length}")
        elif getattr(meta, "pattern", None):
            parts.append(f"pattern `{meta.pattern}`")
        elif getattr(meta, "allow_inf_nan", None) is False:
            parts.append("finite")
    return parts


def default_text(field: FieldInfo) -> str:
    """The field's default, calling a default factory if there is one."""
    if field.default_factory is not None:
        return format_value(field.default_factory())  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return "(required)"
    return format_value(field.default)


# -- schema walking --------------------------------------------------------------------------


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The section model of a field typed ``Model`` or ``Model | None``, else None."""
    if _is_model(annotation):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 and _is_model(args[0]) else None


def _sections(root: type[BaseModel], prefix: str = "") -> list[tuple[str, type[BaseModel]]]:
    """Every section model, nested ones under dotted names (``actor.fsdp_config``)."""
    found: list[tuple[str, type[BaseModel]]] = []
    for name, f in root.model_fields.items():
        model = _section_model(f.annotation)
        if model is not None:
            found.append((f"{prefix}{name}", model))
            found += _sections(model, prefix=f"{prefix}{name}.")
    return found


def builtin_names(kind: str) -> list[str]:
    """Names rlpipe registers (objects of rl_core or torch.optim, references into infra)."""
    from rl_core.registries import registry_for

    registry = registry_for(kind)
    names = []
    for name in registry.names():
        obj = registry.get(name)
        owner = getattr(obj, "builder", obj)  # models register a ModelSpec(builder, ...)
        module = owner if isinstance(owner, str) else str(getattr(owner, "__module__", ""))
        if module.startswith(("rl_core.", "infra.", "torch.optim.")):
            names.append(name)
    return names


def _check_tables(
    roots: list[type[BaseModel]], sections: list[tuple[str, type[BaseModel]]]
) -> None:
    """Fail if the tables above refer to fields or validators the schema does not have."""
    known = {("", n) for root in roots for n in root.model_fields} | {
        (s, n) for s, model in sections for n in model.model_fields
    }
    for table in (REGISTERED_FIELDS, FIELD_VALIDATOR_NOTES, FALLBACK_DESCRIPTIONS):
        missing = sorted(k for k in table if k not in known)
        if missing:
            raise SchemaDocsError(f"{TABLES_FILE} names unknown fields: {missing}")
    models = [*(("", root) for root in roots), *sections]
    validated = {
        (s, f)
        for s, model in models
        for dec in model.__pydantic_decorators__.field_validators.values()
        for f in dec.info.fields
    }
    undocumented = sorted(validated - set(REGISTERED_FIELDS) - set(FIELD_VALIDATOR_NOTES))
    if undocumented:
        raise SchemaDocsError(
            f"fields with validators not described in {TABLES_FILE}: {undocumented}"
        )
    rules = {
        (model.__name__, name)
        for _, model in models
        for name in model.__pydantic_decorators__.model_validators
        if not any(
            name in base.__pydantic_decorators__.model_validators
            for base in model.__bases__
            if hasattr(base, "__pydantic_decorators__")
        )
    }
    if rules != set(CROSS_FIELD_RULES):
        raise SchemaDocsError(
            f"CROSS_FIELD_RULES in {TABLES_FILE} does not match the schema's model "
            f"validators: missing {sorted(rules - set(CROSS_FIELD_RULES))}, "
            f"stale {sorted(set(CROSS_FIELD_RULES) - rules)}"
        )


def _allowed(section: str, name: str, field: FieldInfo, shared_notes: bool = True) -> str:
    parts = [
        ", ".join(f"`{format_value(v)}`" for v in _literal_args(field.annotation)),
        ", ".join(constraint_text(field)),
    ]
    kind = REGISTERED_FIELDS.get((section, name)) if shared_notes else None
    if kind is not None:
        parts.append("registered: " + ", ".join(f"`{n}`" for n in builtin_names(kind)))
    note = FIELD_VALIDATOR_NOTES.get((section, name)) if shared_notes else None
    if note is not None:
        from rl_core.config.limits import MAX_CONV_LAYERS, MAX_LAYER_WIDTH
        from rl_core.config.placement import KNOWN_COMPONENTS

        components = ", ".join(KNOWN_COMPONENTS)
        parts.append(
            note.format(
                components=components,
                max_layer_width=MAX_LAYER_WIDTH,
                max_conv_layers=MAX_CONV_LAYERS,
            )
        )
    return "; ".join(p for p in parts if p)


def field_table(section: str, model: type[BaseModel], only: list[str] | None = None) -> list[str]:
    """Markdown table rows of the fields of ``model`` (or of ``only``)."""
    lines = [
        "| field | type | default | allowed values / range | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, field in model.model_fields.items():
        if (only is not None and name not in only) or (section and _is_model(field.annotation)):
            continue  # a nested section gets a table of its own
        description = field.description or FALLBACK_DESCRIPTIONS.get((section, name), "")
        cells = [
            f"`{name}`",
            type_name(field.annotation),
            f"`{default_text(field)}`",
            _allowed(section, name, field, shared_notes=not _retyped(section, name, model)),
            description,
        ]
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    return lines


def _retyped(section: str, name: str, model: type[BaseModel]) -> bool:
    """A registered-name field that ``model`` replaces with a type of its own (a Literal).

    E.g. a kind's ``data.source`` with fixed values: the registry and the notes of the
    shared field of that name do not describe it.
    """
    if (section, name) not in REGISTERED_FIELDS:
        return False
    decorators = model.__pydantic_decorators__.field_validators.values()
    return not any(name in d.info.fields for d in decorators)


# -- page ------------------------------------------------------------------------------------


def _registered_sentence() -> str:
    parts = []
    for (section, name), kind in REGISTERED_FIELDS.items():
        names = ", ".join(f"`{n}`" for n in builtin_names(kind))
        parts.append(f"- `{section}.{name}`: {names}")
    return "\n".join(parts)


def builtin_kinds() -> list[str]:
    """rlpipe's own kinds (those its ``pyproject.toml`` declares), in alphabetical order."""
    from rl_core.kind_packages import source_checkout_kind_packages

    return sorted(source_checkout_kind_packages())


def kind_sections() -> list[tuple[str, str, type[BaseModel], list[str] | None]]:
    """``(kind, section, model, fields)`` a built-in kind adds (fields None: all of them)."""
    from rl_core.config.schema import RLPipeConfig
    from rl_core.kind import kind_named

    found = []
    for kind in builtin_kinds():
        refines = kind_named(kind).refines
        shared = dict(_sections(kind_named(refines).config if refines else RLPipeConfig))
        for name, model in _sections(kind_named(kind).config):
            base = shared.get(name)
            if base is model:
                continue
            own = (
                None
                if base is None
                else [n for n in model.model_fields if _differs(model, base, n)]
            )
            found.append((kind, name, model, own))
    return found


def _differs(model: type[BaseModel], base: type[BaseModel], name: str) -> bool:
    """Whether ``model``'s field ``name`` is its own: new, or of another type or default."""
    if name not in base.model_fields:
        return True
    field, shared = model.model_fields[name], base.model_fields[name]
    return (field.annotation, field.default) != (shared.annotation, shared.default)


def _section_block(name: str, model: type[BaseModel], title: str) -> list[str]:
    doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
    extra = "kept" if model.model_config.get("extra") == "allow" else "rejected"
    return ["", f"## {title}", "", f"{doc} Unknown keys are {extra}.", ""]


def render() -> str:
    """The full text of docs/configuration.md (deterministic)."""
    from rl_core.config.loader import DEFAULT_PRESET
    from rl_core.config.schema import RLPipeConfig
    from rl_core.kind import kind_named

    sections = _sections(RLPipeConfig)
    kinds = kind_sections()
    roots = [RLPipeConfig, *(kind_named(k).config for k in builtin_kinds())]
    _check_tables(roots, sections + [(name, model) for _, name, model, _ in kinds])
    top_level = [n for n in RLPipeConfig.model_fields if n not in dict(sections)]
    out = [
        INTRO.format(
            command=REGEN_COMMAND, default=DEFAULT_PRESET, registered=_registered_sentence()
        ).rstrip("\n"),
        "",
        "## Presets",
        "",
        *presets_table(),
        "",
        "## Cross-field rules",
        "",
        *[f"- {rule}" for rule in CROSS_FIELD_RULES.values()],
        "- `cluster.component_placement` must place `env`, `rollout` and `actor` (and `ref` "
        "when used, by default with the actor) on CPUs, or GPUs, the cluster has; on GPUs "
        "each group's workers must divide evenly over its GPUs, trainer ranks need a GPU "
        "each and the ranks of a tensor-parallel group one node (checked when the run "
        "starts, before any worker starts; see [GPUs](gpu.md)).",
        "",
        "## Top level",
        "",
        *field_table("", RLPipeConfig, only=top_level),
    ]
    for name, model in sections:
        out += _section_block(name, model, f"`{name}`")
        out += field_table(name, model)
    for kind, name, model, own in kinds:
        title = f"`{name}` ({kind} runs" + (")" if own is None else ": their own fields)")
        out += _section_block(name, model, title)
        out += field_table(name, model, only=own)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write docs/configuration.md, or with ``--check`` report whether it is up to date."""
    return write_or_check(
        argv, __doc__.splitlines()[0], OUTPUT, render(), "config schema", REGEN_COMMAND
    )


if __name__ == "__main__":
    sys.exit(main())
