"""Which processes get checkpoint store credentials (no Ray needed: the decisions only)."""

from __future__ import annotations

import os

import pytest

from infra.cluster.runtime_env import (
    STORE_ACCESS_VARS,
    all_store_access_vars,
    register_store_access_vars,
    store_access_env,
    without_vars,
    worker_env_vars,
)
from infra.cluster.worker_group import store_access_options
from infra.llm.workers.llm_workers import LLMActorWorker, LLMRefWorker
from kinds.embodied.workers.actor_worker import ActorWorker
from kinds.embodied.workers.env_worker import EnvWorker
from kinds.embodied.workers.rollout_worker import RolloutWorker
from kinds.reasoning.workers.llm_rollout_worker import LLMRolloutWorker
from tests.env_vars import unset


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-456")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    unset(monkeypatch, "AWS_SESSION_TOKEN")
    unset(monkeypatch, "AWS_PROFILE")


def test_every_worker_gets_the_base_env_but_no_store_credentials(aws) -> None:
    env = worker_env_vars()
    assert env["OMP_NUM_THREADS"] and "AWS_SECRET_ACCESS_KEY" not in env
    assert not set(env) & set(all_store_access_vars())


def test_store_access_env_by_scheme(aws) -> None:
    s3 = store_access_env("s3://bucket/ckpts/run")
    assert s3["AWS_SECRET_ACCESS_KEY"] == "secret-456"
    assert s3["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert "AWS_SESSION_TOKEN" not in s3  # unset variables are not forwarded
    assert store_access_env("/abs/outputs/run/checkpoints") == {}
    assert store_access_env(None) == {}
    assert store_access_env("memory://x") == {}  # a scheme without registered variables


def test_registered_schemes_get_their_own_variables(monkeypatch) -> None:
    monkeypatch.setitem(STORE_ACCESS_VARS, "gs", ())
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/keys/sa.json")
    register_store_access_vars("GS", ("GOOGLE_APPLICATION_CREDENTIALS",))
    assert store_access_env("gs://b/p") == {"GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json"}
    assert "GOOGLE_APPLICATION_CREDENTIALS" in all_store_access_vars()


@pytest.mark.parametrize("cls", [ActorWorker, LLMActorWorker])
def test_trainers_of_an_s3_run_get_the_credentials(aws, cls: type) -> None:
    options = store_access_options(cls, ({"run": {"checkpoint_uri": "s3://b/c"}}, 0))
    assert options["runtime_env"]["env_vars"]["AWS_SECRET_ACCESS_KEY"] == "secret-456"
    assert store_access_options(cls, ({"run": {"checkpoint_uri": None}}, 0)) == {}


@pytest.mark.parametrize("cls", [EnvWorker, RolloutWorker, LLMRolloutWorker, LLMRefWorker])
def test_workers_that_never_open_the_store_get_nothing(aws, cls: type) -> None:
    assert store_access_options(cls, ({"run": {"checkpoint_uri": "s3://b/c"}}, 0)) == {}


def test_without_vars_hides_and_restores(aws) -> None:
    with without_vars(("AWS_SECRET_ACCESS_KEY", "NOT_SET_ANYWHERE")):
        assert "AWS_SECRET_ACCESS_KEY" not in os.environ
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "secret-456"
    assert "NOT_SET_ANYWHERE" not in os.environ
