"""Checkpoint store credentials reach only the workers that open the store.

A local Ray cluster is started by the driver, whose environment holds AWS credentials; the
cluster's processes do not inherit them, and only a checkpoint-writing worker group of a
run whose store is on S3 gets them (through its own ``runtime_env``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from infra.cluster import ray_cluster
from infra.cluster.placement import GroupPlacement
from infra.cluster.worker_group import WorkerGroup
from rl_core.config import load_config
from tests.env_vars import unset
from tests.fixtures.store_probe_workers import (
    CheckpointWriterProbe,
    PlainWorkerProbe,
    task_variables,
)

pytestmark = pytest.mark.integration
SECRET = "probe-secret-access-key-0123456789"
NAMES = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "OMP_NUM_THREADS"]
S3_RUN = load_config("ppo_cartpole", ["run.checkpoint_uri=s3://bucket/ckpts"]).model_dump(
    mode="json"
)
LOCAL_RUN = load_config("ppo_cartpole").model_dump(mode="json")


@pytest.fixture()
def local_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local cluster started by a driver that holds AWS credentials."""
    unset(monkeypatch, "RAY_ADDRESS")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "probe-access-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    ray_cluster.connect(num_cpus=2)
    try:
        yield
    finally:
        ray_cluster.shutdown()


def _group(name: str, cls: type, config: dict) -> WorkerGroup:
    group = WorkerGroup(name, cls, 1, GroupPlacement((0,), 0.25), lambda r: (config, r))
    group.wait_started(timeout=120)
    return group


def test_only_checkpoint_writers_of_an_s3_run_get_store_credentials(local_ray) -> None:
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == SECRET  # the driver keeps its own

    writer = _group("actor", CheckpointWriterProbe, S3_RUN)
    seen = ray.get(writer[0].variables.remote(NAMES))
    assert seen["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert seen["AWS_ACCESS_KEY_ID"] == "probe-access-key-id"
    assert seen["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert seen["OMP_NUM_THREADS"] == "1"  # the job's variables still arrive (merged)

    others = [
        ("env", PlainWorkerProbe, S3_RUN),  # does not open the store
        ("actor", CheckpointWriterProbe, LOCAL_RUN),  # the store is local
    ]
    for name, cls, config in others:
        group = _group(name, cls, config)
        seen = ray.get(group[0].variables.remote(NAMES))
        assert seen["AWS_SECRET_ACCESS_KEY"] is None, (cls.__name__, config)
        assert seen["AWS_ACCESS_KEY_ID"] is None
        assert seen["OMP_NUM_THREADS"] == "1"
        pid = ray.get(group[0].ping.remote())
        assert SECRET.encode() not in Path(f"/proc/{pid}/environ").read_bytes()

    from_task = ray.get(ray.remote(task_variables).options(num_cpus=0).remote(NAMES))
    assert from_task["AWS_SECRET_ACCESS_KEY"] is None
