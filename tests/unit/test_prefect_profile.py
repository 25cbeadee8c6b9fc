"""The active Prefect profile's API URL, read without importing Prefect."""

from __future__ import annotations

import logging
import os

import pytest

from infra.ops import prefect_api, prefect_profile
from infra.processes import free_port
from tests.env_vars import unset


@pytest.fixture()
def profiles(tmp_path, monkeypatch):
    """A profiles file of this test; no PREFECT_PROFILE, no PREFECT_API_URL."""
    path = tmp_path / "profiles.toml"
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(path))
    unset(monkeypatch, "PREFECT_PROFILE")
    unset(monkeypatch, "PREFECT_API_URL")
    return path


def test_no_file_means_prefects_default_profile_without_an_api(profiles):
    assert not profiles.exists()
    assert prefect_profile.profile_api_url() is None  # "ephemeral" names no API


def test_active_profile_of_the_file_and_the_variable(profiles, monkeypatch):
    profiles.write_text(
        'active = "mine"\n'
        '[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:4321/api"\n'
        '[profiles.other]\nPREFECT_LOGGING_LEVEL = "DEBUG"\n'
    )
    assert prefect_profile.profile_api_url() == ("mine", "http://127.0.0.1:4321/api")
    monkeypatch.setenv("PREFECT_PROFILE", "other")
    assert prefect_profile.profile_api_url() is None
    # a profile missing from the user's file comes from Prefect's defaults
    monkeypatch.setenv("PREFECT_PROFILE", "local")
    assert prefect_profile.profile_api_url() == ("local", "http://127.0.0.1:4200/api")


def test_a_broken_file_is_no_profile(profiles):
    profiles.write_text('active = "mine\n[profiles')
    assert prefect_profile.profile_api_url() is None


def test_profiles_path_follows_prefect_home(monkeypatch, tmp_path):
    unset(monkeypatch, "PREFECT_PROFILES_PATH")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert prefect_profile.profiles_path() == tmp_path / "profiles.toml"


def test_start_prefect_api_uses_an_answering_profile_api(profiles, health_api, monkeypatch):
    profiles.write_text(f'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "{health_api}"\n')
    monkeypatch.setattr(prefect_api, "_started", None)

    def no_server(*args, **kwargs):
        raise AssertionError("a local server was started")

    monkeypatch.setattr(prefect_api, "LocalPrefectServer", no_server)
    assert prefect_api.start_prefect_api(profiles.parent) is None
    assert os.environ["PREFECT_API_URL"] == health_api  # exported for the Ray workers


def test_a_silent_profile_api_is_named_and_a_local_one_starts(profiles, monkeypatch, caplog):
    silent = f"http://127.0.0.1:{free_port()}/api"
    profiles.write_text(f'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "{silent}"\n')
    started = []

    class FakeServer:
        def __init__(self, log_path, *args, **kwargs):
            self.url = "http://127.0.0.1:1/api"
            started.append(log_path)

    monkeypatch.setattr(prefect_api, "_started", None)
    monkeypatch.setattr(prefect_api, "LocalPrefectServer", FakeServer)
    with caplog.at_level(logging.WARNING, logger=prefect_profile.__name__):
        server = prefect_api.start_prefect_api(profiles.parent)
    assert started and server.url == os.environ["PREFECT_API_URL"]
    assert f"profile 'mine' names PREFECT_API_URL={silent}, which does not answer" in caplog.text
    monkeypatch.delenv("PREFECT_API_URL")
