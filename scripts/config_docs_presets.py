"""The presets table of docs/configuration.md (see ``gen_config_docs.py``)."""

from __future__ import annotations

from pathlib import Path

import yaml


def table_cell(text: str) -> str:
    """Make ``text`` safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _preset_summary(path: Path) -> str:
    """First sentence of the comment block at the top of a preset file."""
    comment = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    text = " ".join(comment)
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def _preset_keys(path: Path) -> list[str]:
    """``section.field`` names a preset sets (the ``preset`` key itself included if set)."""
    data = yaml.safe_load(path.read_text()) or {}
    keys = []
    for section, body in data.items():
        if isinstance(body, dict):
            keys += [f"{section}.{field}" for field in body]
        else:
            keys.append(str(section))
    return keys


def presets_table() -> list[str]:
    """Name, file, first comment sentence and fields set, of every shipped preset."""
    from rl_core.config.loader import DEFAULT_PRESET, PRESET_DIR, available_presets

    lines = ["| preset | file | what it is | fields it sets |", "| --- | --- | --- | --- |"]
    for name in available_presets():
        path = PRESET_DIR / f"{name}.yaml"
        label = f"`{name}` (default)" if name == DEFAULT_PRESET else f"`{name}`"
        keys = ", ".join(f"`{k}`" for k in _preset_keys(path))
        cells = [label, f"`rl_core/presets/{path.name}`", _preset_summary(path), keys]
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    return lines
