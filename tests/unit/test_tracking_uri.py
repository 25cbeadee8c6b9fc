"""Which MLflow store a run logs to: config, then MLFLOW_TRACKING_URI, then SQLite."""

from pathlib import Path

from infra.driver.session import default_artifact_location, resolve_tracking_uri
from tests.env_vars import unset


def test_config_wins_over_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert resolve_tracking_uri("sqlite:///x.db", tmp_path) == "sqlite:///x.db"


def test_environment_wins_over_default(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert resolve_tracking_uri(None, tmp_path) == "http://127.0.0.1:5999"


def test_default_is_sqlite_under_output_dir(monkeypatch, tmp_path: Path) -> None:
    unset(monkeypatch, "MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"


def test_artifacts_of_a_tracking_server_are_the_servers_business(tmp_path: Path) -> None:
    assert default_artifact_location("http://127.0.0.1:5000", tmp_path) is None
    local = default_artifact_location(f"sqlite:///{tmp_path}/mlflow.db", tmp_path)
    assert local == str(tmp_path / "mlartifacts")
