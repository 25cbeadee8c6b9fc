"""Tests against a real Ray cluster only (a local one, or nodes of ``ray.cluster_utils``
on 127.0.0.1), started by the tests: workers, placement, trainers and runtimes driven in the
test process, without a Prefect API or MLflow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A local Ray cluster (2 CPUs) in this process for the module's tests."""
    from infra.cluster.ray_cluster import connect, shutdown

    connect(num_cpus=2)
    yield
    shutdown()


@pytest.fixture(scope="module")
def tiny_lm_one_layer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny test model with one layer (fast generation), for the module's tests."""
    from rl_core.models.tiny_lm import create_tiny_lm

    return str(create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1))
