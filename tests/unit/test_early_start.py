"""The train CLI starts its local services early only for a command line that validates."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from flows import PROJECT_LOGGERS, early_start
from infra.cluster import ray_cluster
from infra.ops import prefect_api
from tests.env_vars import unset


@pytest.fixture(autouse=True)
def no_kept_records() -> Any:
    """Every test leaves no start-up log buffer behind (the CLI replays it once)."""
    early_start.replay_early_logs()
    yield
    early_start.replay_early_logs()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    unset(monkeypatch, "RLPIPE_EXT_MODULE")
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(prefect_api, "start_prefect_api", lambda d: calls.append(("api", d)))
    monkeypatch.setattr(
        ray_cluster,
        "connect",
        lambda address, num_cpus, num_gpus=None: calls.append(("ray", num_cpus)),
    )
    return calls


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--config", "no_such_preset"],
        ["--no-such-flag"],
        ["actor.lr"],  # not an override
        ["--run-name", "bad name/with slash"],
    ],
)
def test_nothing_starts_for_bad_or_help_command_lines(
    argv: list[str], started: list[tuple[str, Any]]
) -> None:
    assert early_start.start_services_early(argv) is False
    assert started == []


def test_extension_modules_leave_the_start_to_the_cli(
    started: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RLPIPE_EXT_MODULE", "some_module")  # loaded and logged by the CLI
    assert early_start.start_services_early([f"run.output_dir={tmp_path}"]) is False
    assert started == []


def test_a_valid_command_line_starts_the_api_then_ray(
    started: list[tuple[str, Any]], tmp_path: Path
) -> None:
    argv = ["--config", "ppo_cartpole", f"run.output_dir={tmp_path}", "cluster.num_cpus=2"]
    assert early_start.start_services_early(argv) is True
    assert started == [("api", tmp_path / ".prefect"), ("ray", 2)]


def test_a_failing_service_start_is_left_to_the_cli(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(*_: Any) -> None:
        raise RuntimeError("ray did not start")

    monkeypatch.setattr(prefect_api, "start_prefect_api", lambda d: None)
    monkeypatch.setattr(ray_cluster, "connect", refuse)
    assert early_start.start_services_early([f"run.output_dir={tmp_path}"]) is False


def test_the_api_started_early_is_the_one_the_cli_gets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class FakeServer:
        def __init__(self, log_path: Path) -> None:
            self.url = f"http://127.0.0.1:1/{log_path.parent.name}/api"
            self.process = self
            self.exit_code: int | None = None

        def poll(self) -> int | None:
            return self.exit_code

    monkeypatch.setattr(prefect_api, "LocalPrefectServer", FakeServer)
    monkeypatch.setattr(prefect_api, "_started", None)
    for name in ("PREFECT_API_URL", "PREFECT_CLIENT_CSRF_SUPPORT_ENABLED"):
        monkeypatch.setenv(name, "")  # restored (or removed) after the test
        monkeypatch.delenv(name)
    early = prefect_api.start_prefect_api(tmp_path / "a")
    assert prefect_api.start_prefect_api(tmp_path / "b") is early  # reused, not a second one
    early.stop = lambda: setattr(early, "exit_code", 0)
    prefect_api.stop_prefect_api(early)  # and its URL is no longer exported
    assert "PREFECT_API_URL" not in os.environ
    assert prefect_api.start_prefect_api(tmp_path / "c").url.endswith("/c/api")


def test_start_up_records_reach_the_handlers_the_cli_sets_up_later(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    unset(monkeypatch, "RLPIPE_EXT_MODULE")
    monkeypatch.setattr(
        prefect_api,
        "start_prefect_api",
        lambda d: logging.getLogger("infra.ops.probe").info("using the API at %s", d),
    )
    monkeypatch.setattr(ray_cluster, "connect", lambda address, num_cpus, num_gpus=None: None)
    caplog.set_level(logging.INFO)
    argv = ["--config", "ppo_cartpole", f"run.output_dir={tmp_path}"]
    assert early_start.start_services_early(argv) is True
    caplog.clear()  # (pytest's handler saw it already; the CLI has none yet at this point)
    early_start.replay_early_logs()
    assert f"using the API at {tmp_path / '.prefect'}" in caplog.text
    early_start.replay_early_logs()  # once only
    assert caplog.text.count("using the API") == 1
    assert all(
        not isinstance(h, logging.handlers.MemoryHandler)
        for name in PROJECT_LOGGERS
        for h in logging.getLogger(name).handlers
    )


def test_a_config_failing_validation_stops_the_server_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    unset(monkeypatch, "RLPIPE_EXT_MODULE")
    calls: list[tuple[str, Any]] = []
    server = object()

    def start(state_dir: Path) -> object:
        calls.append(("api", state_dir))
        return server

    monkeypatch.setattr(prefect_api, "start_prefect_api", start)
    monkeypatch.setattr(prefect_api, "stop_prefect_api", lambda s: calls.append(("stop", s)))
    monkeypatch.setattr(ray_cluster, "connect", lambda *a: calls.append(("ray", a)))
    argv = [f"run.output_dir={tmp_path}", "actor.lr=-1"]  # fails the schema
    assert early_start.start_services_early(argv) is False
    assert calls == [("api", tmp_path / ".prefect"), ("stop", server)]  # Ray not started


def test_the_server_state_dir_defaults_to_the_schemas_output_dir(
    started: list[tuple[str, Any]],
) -> None:
    from rl_core.config.run_sections import RunConfig

    assert early_start.start_services_early(["--config", "ppo_cartpole"]) is True
    default = RunConfig.model_fields["output_dir"].default
    assert started[0] == ("api", Path(default) / ".prefect")
