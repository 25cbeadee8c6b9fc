"""TrainSession takes the run lease before it reads or writes anything, and gives it back."""

from __future__ import annotations

import pytest

from infra.checkpoint.lease import LeaseHeldError, RunLease
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.store import CheckpointError
from infra.driver.session import TrainSession
from rl_core.config import ConfigError, load_config


def config(tmp_path, *overrides: str):
    return load_config(
        "ppo_cartpole", [f"run.output_dir={tmp_path}", "run.name=leased", *overrides]
    )


def files_under(path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())


def test_a_held_run_is_refused_before_anything_is_read_or_written(tmp_path) -> None:
    cfg = config(tmp_path)
    store = run_store_uri(tmp_path, "leased")
    with RunLease(store, "leased"):
        before = files_under(tmp_path)
        with pytest.raises(LeaseHeldError, match=r"^run 'leased' is being trained by host "):
            TrainSession(cfg)
        assert files_under(tmp_path) == before  # no MLflow db, no workers.json, no checkpoint
    assert before == ["leased/checkpoints/lease.json", "leased/checkpoints/lease.lock"]


def test_a_session_that_fails_to_open_releases_the_lease(tmp_path) -> None:
    cfg = config(tmp_path, "run.resume=must")
    with pytest.raises(CheckpointError, match="run.resume=must"):
        TrainSession(cfg)
    store = run_store_uri(tmp_path, "leased")
    with RunLease(store, "leased") as lease:  # free again
        assert lease.held


def test_lease_ttl_is_validated(tmp_path) -> None:
    assert config(tmp_path).run.lease_ttl_s == 60
    assert config(tmp_path, "run.lease_ttl_s=8").run.lease_ttl_s == 8
    with pytest.raises(ConfigError, match="lease_ttl_s"):
        config(tmp_path, "run.lease_ttl_s=0.5")
