"""docs/configuration.md is generated from the config schema and must not go stale."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_config_docs.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_md_matches_schema():
    gen = _generator()
    expected = gen.render()
    path = ROOT / "docs" / "configuration.md"
    current = path.read_text() if path.exists() else ""
    assert current == expected, (
        "docs/configuration.md is stale (the config schema, presets or registries changed); "
        f"regenerate it with: {gen.REGEN_COMMAND}"
    )


def test_render_is_deterministic_and_covers_every_field():
    gen = _generator()
    text = gen.render()
    assert text == gen.render()
    from rl_core.config import RLPipeConfig

    def covered(section: str, model) -> None:
        assert f"## `{section}`" in text
        for name, field in model.model_fields.items():
            if hasattr(field.annotation, "model_fields"):  # nested section: its own table
                covered(f"{section}.{name}", field.annotation)
            else:
                assert f"| `{name}` |" in text, f"{section}.{name} missing from the page"

    from rl_core.kind import kind_named

    for root in (RLPipeConfig, kind_named("embodied").config, kind_named("reasoning").config):
        for section, field in root.model_fields.items():
            if hasattr(field.annotation, "model_fields"):
                covered(section, field.annotation)
            else:
                assert f"| `{section}` |" in text
