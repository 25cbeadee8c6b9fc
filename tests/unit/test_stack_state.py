"""Attaching a run to a running local stack: which variables it takes, and when it does not."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.ops import stack_state
from tests.env_vars import unset


@pytest.fixture()
def api(health_api: str) -> str:
    return health_api


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    unset(monkeypatch, *stack_state.SERVICE_VARS, stack_state.SWITCH_VAR)


def write_stack(home: Path, api: str, pid: int, ray: str | None = None) -> None:
    env = {"PREFECT_API_URL": api, "MLFLOW_TRACKING_URI": "http://127.0.0.1:5999"}
    if ray:
        env["RAY_ADDRESS"] = ray
    home.mkdir(parents=True, exist_ok=True)
    state = {"pid": pid, "home": str(home), "env": {**env, "RLPIPE_ROOT": "/elsewhere"}}
    (home / stack_state.STATE_FILE).write_text(json.dumps(state))


def test_attaches_to_a_running_stack_and_says_so(tmp_path, api, clean_env, caplog):
    write_stack(tmp_path, api, os.getpid(), ray="127.0.0.1:6399")
    with caplog.at_level(logging.INFO, logger=stack_state.__name__):
        applied = stack_state.attach_running_stack(tmp_path)
    assert applied == {
        "PREFECT_API_URL": api,
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:5999",
        "RAY_ADDRESS": "127.0.0.1:6399",
    }
    assert {k: os.environ[k] for k in applied} == applied
    assert "RLPIPE_ROOT" not in applied  # only the services
    assert f"using the running local stack ({tmp_path})" in caplog.text
    assert "RLPIPE_STACK=off" in caplog.text


def test_keeps_what_the_environment_sets(tmp_path, api, clean_env, monkeypatch):
    write_stack(tmp_path, api, os.getpid())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mine.db")
    assert stack_state.attach_running_stack(tmp_path) == {"PREFECT_API_URL": api}
    assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:///mine.db"
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")  # a chosen API: no stack
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert stack_state.attach_running_stack(tmp_path) == {}
    assert "MLFLOW_TRACKING_URI" not in os.environ


def test_switched_off(tmp_path, api, clean_env, monkeypatch, caplog):
    write_stack(tmp_path, api, os.getpid())
    monkeypatch.setenv(stack_state.SWITCH_VAR, "off")
    with caplog.at_level(logging.INFO, logger=stack_state.__name__):
        assert stack_state.attach_running_stack(tmp_path) == {}
    assert "PREFECT_API_URL" not in os.environ
    assert caplog.text == ""


def test_ignores_a_stack_that_is_gone_or_silent(tmp_path, api, clean_env):
    assert stack_state.attach_running_stack(tmp_path / "none") == {}  # no stack.json
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / stack_state.STATE_FILE).write_text("{not json")
    assert stack_state.attach_running_stack(tmp_path / "bad") == {}
    exited = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    write_stack(tmp_path / "dead", api, int(exited.stdout))  # its process has exited
    assert stack_state.attach_running_stack(tmp_path / "dead") == {}
    write_stack(tmp_path / "mute", api.replace("/api", "/nothing"), os.getpid())  # no health
    assert stack_state.attach_running_stack(tmp_path / "mute") == {}
    assert "PREFECT_API_URL" not in os.environ


def test_default_home_follows_the_variable(tmp_path, monkeypatch):
    unset(monkeypatch, stack_state.HOME_VAR)
    assert stack_state.default_home() == stack_state.PROJECT_ROOT / ".stack"
    monkeypatch.setenv(stack_state.HOME_VAR, str(tmp_path))
    assert stack_state.default_home() == tmp_path
