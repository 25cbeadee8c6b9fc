"""GPU placements on two Ray nodes with 2 logical GPUs each (``ray.cluster_utils.Cluster``,
every node on 127.0.0.1): placement indices count across nodes (index 2 is the first GPU of
the second node), also when the placement skips GPUs of a node, the workers of a node rank
share one node and node ranks use different nodes, and the ranks of a tensor-parallel group
sit on one node."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from ray.cluster_utils import Cluster

from infra.cluster.cluster_placement import place
from infra.cluster.devices import ALLOW_LOGICAL_GPUS_VAR
from infra.cluster.placement import PlacementError
from infra.cluster.ray_cluster import connect, loopback_only, shutdown
from infra.cluster.worker_group import WorkerGroup
from rl_core.config import load_config
from tests.cluster.test_gpu_placement import live_placement_groups, reserved_ids
from tests.toy_workers import ToyWorker

pytestmark = pytest.mark.integration

#: (placement overrides, workers per group, tensor-parallel size, GPU index of each worker).
LAYOUTS = {
    "collocated": (
        ["cluster.component_placement={env: 0-3, 'actor,rollout': 0-3}"],
        {"env": 2, "rollout": 4, "actor": 4},
        1,
        {"env": [0, 1], "rollout": [0, 1, 2, 3], "actor": [0, 1, 2, 3]},
    ),
    "disaggregated": (
        ["cluster.component_placement={actor: 0-1, 'env,rollout': 2-3}"],
        {"env": 1, "rollout": 2, "actor": 2},
        1,
        {"env": [2], "rollout": [2, 3], "actor": [0, 1]},
    ),
    "hybrid, tensor parallel 2": (
        ["cluster.component_placement={'env,rollout,actor': all}"],
        {"env": 1, "actor": 4},
        2,
        {"env": [0], "actor": [0, 1, 2, 3]},
    ),
    # GPU 0 of the second node is skipped: its first bundle holds 0, the workers need 1
    "gap on the second node": (
        ["cluster.component_placement={actor: 0, 'rollout,env': 3}"],
        {"env": 1, "rollout": 1, "actor": 1},
        1,
        {"env": [3], "rollout": [3], "actor": [0]},
    ),
}


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Cluster]:
    """A head and a worker node, each 1 CPU and 2 logical GPUs."""
    os.environ[ALLOW_LOGICAL_GPUS_VAR] = "1"
    loopback_only()
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "num_gpus": 2}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    connect(address=cluster.address)
    yield cluster
    shutdown()
    cluster.shutdown()
    os.environ.pop(ALLOW_LOGICAL_GPUS_VAR, None)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gpu_indices_count_across_nodes_and_tensor_peers_share_one(two_nodes, layout) -> None:
    overrides, sizes, tensor_parallel, expected = LAYOUTS[layout]
    cfg = load_config("ppo_cartpole", [*overrides, "cluster.num_nodes=2"])
    before = live_placement_groups()
    plan = place(cfg, sizes, tensor_parallel=tensor_parallel)
    assert plan.cluster is not None and plan.cluster.describe() == "4 GPUs (2 node(s) x 2)"
    assert live_placement_groups() - before == reserved_ids(plan)  # no filler left
    config = cfg.model_dump(mode="json")
    groups = [
        WorkerGroup(name, ToyWorker, n, plan[name], lambda r: (config, r))
        for name, n in sizes.items()
    ]
    try:
        for group in groups:
            group.wait_started(180)
        reports = plan.check_workers(groups)
        node_of_rank: dict[int, set[str]] = {}
        for group, size in zip(groups, sizes.values(), strict=True):
            mine, reports = reports[:size], reports[size:]
            for index, report in zip(expected[group.name], mine, strict=True):
                node_of_rank.setdefault(index // 2, set()).add(report.node_id)
                if group.placement.num_gpus_per_worker:
                    assert report.gpu_ids == (index % 2,), (group.name, index, report)
                    assert report.cuda_visible_devices == str(index % 2)
            if group.name == "actor":
                placed = {(r.node_id, r.gpu_ids) for r in mine}
                assert len(placed) == size, "two trainer ranks share a GPU"
                for first in range(0, size, tensor_parallel):
                    peers = {r.node_id for r in mine[first : first + tensor_parallel]}
                    assert len(peers) == 1, f"tensor-parallel ranks {first}.. on {peers}"
        # one node per node rank (the one its bundles are on), and two node ranks on two nodes
        assert node_of_rank == {rank: {plan.node_ids[rank]} for rank in node_of_rank}
        assert len(set(plan.node_ids.values())) == len(plan.node_ids)
    finally:
        for group in groups:
            group.shutdown()
        plan.release()


def test_a_tensor_parallel_group_across_nodes_is_refused(two_nodes) -> None:
    cfg = load_config(
        "ppo_cartpole",
        ["cluster.num_nodes=2", "cluster.component_placement={'env,rollout': 0, actor: 1-2}"],
    )
    with pytest.raises(PlacementError, match=r"ranks 0-1 form a tensor-parallel group"):
        place(cfg, {"env": 1, "rollout": 1, "actor": 2}, tensor_parallel=2)


def test_more_nodes_than_the_cluster_has_are_refused(two_nodes) -> None:
    cfg = load_config("ppo_cartpole", ["cluster.num_nodes=3"])
    with pytest.raises(PlacementError, match=r"needs 3 node\(s\) .*nodes have GPUs: 2, 2"):
        place(cfg, {"env": 1, "actor": 1})
