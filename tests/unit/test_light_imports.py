"""Validating a config imports only what its kinds need: a CartPole run's driver and
workers (each validates the config) must not pay for importing transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
from rl_core.config import load_config
from rl_core.registries import registry_for
load_config("ppo_cartpole")
assert registry_for("rollout_engine").get("hf")  # the registry itself stays light
print(sorted(m for m in ("transformers", "rl_core.llm.generation") if m in sys.modules))
"""


def test_validating_a_cartpole_config_does_not_import_transformers() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_language_model_helpers_still_import_from_the_package() -> None:
    from rl_core import llm

    assert llm.pad_left.__module__ == "rl_core.llm.batching"
    assert llm.hf_generate.__module__ == "rl_core.llm.generation"
    assert all(callable(getattr(llm, name)) for name in llm.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        llm.nope  # noqa: B018
