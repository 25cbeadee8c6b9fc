"""Trainer ranks on two Ray nodes of a simulated cluster (``ray.cluster_utils.Cluster`` on
this machine, every node on 127.0.0.1): they meet at the address rank 0 names on its own
node, and two ranks on two nodes update exactly as one rank does, for both trainer backends
(FSDP2 data parallel; megatron tensor parallel 2)."""

from __future__ import annotations

import numpy as np
import pytest
import ray
from ray.cluster_utils import Cluster

from infra.cluster.ray_cluster import connect, loopback_only, shutdown
from rl_core.models.tiny_lm import create_tiny_lm
from tests.llm_trainers import batch, config, full_state, trainer, update

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_nodes():
    """A head and a worker node, each 1 CPU and a resource naming it."""
    loopback_only()
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "resources": {"node_a": 1}})
    cluster.add_node(**node, resources={"node_b": 1})
    connect(address=cluster.address)
    yield cluster
    shutdown()
    cluster.shutdown()


def node_of(handle) -> str:
    return ray.get(handle.__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id()))


BACKENDS = {
    "fsdp": [],
    "megatron": [
        "actor.backend=megatron",
        "actor.megatron.tensor_model_parallel_size=2",
        "actor.num_workers=2",
    ],
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ranks_on_two_nodes_meet_at_rank_zeros_node_and_match_one_rank(
    two_nodes, tmp_path, backend
):
    tiny = create_tiny_lm(tmp_path / "tiny", num_hidden_layers=2, num_key_value_heads=2)
    data = batch()
    cfg = config(str(tiny), *BACKENDS[backend])
    tp = cfg["actor"]["megatron"]["tensor_model_parallel_size"] if backend == "megatron" else 1
    apart = trainer(cfg, 2, lambda r: {"num_cpus": 0.3, "resources": {f"node_{'ab'[r]}": 0.5}})
    nodes = [node_of(h) for h in apart]
    assert nodes[0] != nodes[1], "the ranks were meant to run on different nodes"
    single = trainer(
        config(str(tiny)), 1, lambda r: {"num_cpus": 0.3, "resources": {"node_b": 0.5}}
    )
    for it in range(2):
        update(single, data, it)
        update(apart, data, it, tp)
    a, b = full_state(single), full_state(apart)
    diff = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert diff < 1e-5, f"ranks on two nodes differ from one rank by {diff}"
    for h in [*apart, *single]:
        ray.kill(h)
