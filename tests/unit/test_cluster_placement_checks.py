"""What a placement's indices mean, the cluster shape it is planned for, and the check of
where Ray put the workers (pure: Ray's node list and the workers' reports are data)."""

from __future__ import annotations

import pytest

from infra.cluster.cluster_placement import (
    check_device_reports,
    gpu_cluster_shape,
    placement_device,
)
from infra.cluster.devices import DeviceReport
from infra.cluster.gpu_placement import GpuCluster, plan_gpu_placement
from infra.cluster.placement import PlacementError
from rl_core.config import load_config


def node(gpus: int, cpus: int = 8, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"GPU": gpus, "CPU": cpus} if gpus else {"CPU": cpus}}


def report(group: str, rank: int, node_id: str, *gpu_ids: int) -> DeviceReport:
    return DeviceReport(group, rank, node_id, gpu_ids, ",".join(map(str, gpu_ids)), "cuda:0", 1)


@pytest.mark.parametrize(
    ("device", "gpus", "means"), [("auto", 0, "cpu"), ("auto", 2, "cuda"), ("cpu", 8, "cpu")]
)
def test_indices_mean_gpus_when_the_cluster_has_them_unless_told_otherwise(device, gpus, means):
    assert placement_device(device, gpus) == means


def test_cuda_without_gpus_is_refused():
    with pytest.raises(PlacementError, match="cluster.device = 'cuda' but the Ray cluster has no"):
        placement_device("cuda", 0)


def test_the_shape_comes_from_the_config_or_from_rays_nodes():
    nodes = [node(0, 64), node(4, 32), node(4, 16), node(2), node(8, 4, alive=False)]
    detected = gpu_cluster_shape(
        load_config("ppo_cartpole", ["cluster.num_nodes=2"]).cluster, nodes
    )
    assert detected == GpuCluster(num_nodes=2, gpus_per_node=4, cpus_per_node=16)
    asked = load_config("ppo_cartpole", ["cluster.num_gpus_per_node=2"]).cluster
    assert gpu_cluster_shape(asked, nodes) == GpuCluster(1, 2, 32)


def test_a_shape_the_cluster_lacks_is_refused_naming_what_it_has():
    cfg = load_config("ppo_cartpole", ["cluster.num_nodes=2", "cluster.num_gpus_per_node=4"])
    with pytest.raises(PlacementError, match=r"needs 2 node\(s\) .*nodes have GPUs: 4, 2"):
        gpu_cluster_shape(cfg.cluster, [node(4), node(2), node(0)])


def _collocated():
    plan = plan_gpu_placement(
        {"actor,rollout": "0-1", "env": "0"},
        {"env": 1, "rollout": 2, "actor": 2},
        GpuCluster(1, 2, 8),
    )
    return plan


def test_collocated_workers_on_their_planned_gpus_pass():
    plan = _collocated()
    check_device_reports(
        [
            ("env", plan["env"], 0, DeviceReport("env", 0, "n1", (), "", "cpu", 1)),
            ("actor", plan["actor"], 0, report("actor", 0, "n1", 0)),
            ("actor", plan["actor"], 1, report("actor", 1, "n1", 1)),
            ("rollout", plan["rollout"], 0, report("rollout", 0, "n1", 0)),
            ("rollout", plan["rollout"], 1, report("rollout", 1, "n1", 1)),
        ]
    )


def test_collocated_workers_on_different_gpus_are_caught():
    plan = _collocated()
    with pytest.raises(PlacementError, match=r"rollout worker 0 \(planned on GPU 0: .* \[1\]"):
        check_device_reports(
            [
                ("actor", plan["actor"], 0, report("actor", 0, "n1", 0)),
                ("rollout", plan["rollout"], 0, report("rollout", 0, "n1", 1)),
            ]
        )


def test_two_planned_gpus_given_one_are_caught():
    plan = _collocated()
    with pytest.raises(PlacementError, match=r"actor worker 1 \(planned on GPU 1: .* ids \[0\]"):
        check_device_reports(
            [
                ("actor", plan["actor"], 0, report("actor", 0, "n1", 0)),
                ("actor", plan["actor"], 1, report("actor", 1, "n1", 0)),
            ]
        )
