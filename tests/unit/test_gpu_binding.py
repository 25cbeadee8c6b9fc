"""Binding placement indices to the GPUs Ray reserved, and checking where workers run (pure:
what the probes saw and what the workers reported are data)."""

from __future__ import annotations

import pytest

from infra.cluster.devices import DeviceReport
from infra.cluster.gpu_binding import (
    NodeRequest,
    Probe,
    bind,
    check_device_reports,
    node_requests,
    unobtainable,
)
from infra.cluster.gpu_placement import GpuCluster, plan_gpu_placement
from infra.cluster.placement import PlacementError

ONE_BY_FOUR = GpuCluster(num_nodes=1, gpus_per_node=4, cpus_per_node=8)
TWO_BY_TWO = GpuCluster(num_nodes=2, gpus_per_node=2, cpus_per_node=8)
#: The placement of the report that GPUs were not honoured: a gap at GPU 2.
GAP = ({"actor": 3, "rollout": 1, "env": 0}, {"env": 1, "rollout": 1, "actor": 1})


def request(gpus: tuple[int, ...], cpus: tuple[float, ...] | None = None) -> NodeRequest:
    cpus = cpus or (1.0,) * len(gpus)
    return NodeRequest(0, 4, gpus, cpus, tuple(("actor",) for _ in gpus))


def probes(*gpus: int, node: str = "n1") -> list[Probe]:
    return [Probe((g,), node) for g in gpus]


def gpu_report(node: str, *gpu_ids: int) -> DeviceReport:
    return DeviceReport("actor", 0, node, gpu_ids, ",".join(map(str, gpu_ids)), "cuda:0", 1)


def test_each_node_rank_asks_for_its_own_gpu_ids_and_the_cpus_living_with_them():
    plan = plan_gpu_placement(*GAP, ONE_BY_FOUR)
    (only,) = node_requests(plan, 4)
    assert only.gpus == (0, 1, 3)
    assert only.owners == (("env",), ("rollout",), ("actor",))
    each = plan["actor"].num_cpus_per_worker
    assert only.cpus == pytest.approx((each, each, each), abs=2e-4)
    two = plan_gpu_placement(
        {"actor": "0", "rollout,env": "3"}, {"env": 1, "rollout": 1, "actor": 1}, TWO_BY_TWO
    )
    first, second = node_requests(two, 2)
    assert (first.node_rank, first.gpus, second.node_rank, second.gpus) == (0, (0,), 1, (1,))
    assert second.index(1) == 3 and second.owners == (("env", "rollout"),)


def test_bundles_holding_exactly_the_planned_gpus_are_bound_in_any_order():
    assert bind(request((0, 1, 3)), probes(0, 1, 3), (1.0,) * 3) == {0: 0, 1: 1, 3: 2}
    assert bind(request((1, 3)), probes(3, 1), (1.0, 1.0)) == {3: 0, 1: 1}


@pytest.mark.parametrize(
    ("held", "why"),
    [
        (probes(0, 1, 2), "Ray gave the lowest free GPUs, not GPU 3"),
        (probes(0, 1) + probes(3, node="n2"), "the bundles span two nodes"),
        ([Probe((0, 1), "n1"), *probes(3)], "a bundle holds two GPUs"),
    ],
)
def test_bundles_holding_other_gpus_are_not_bound(held, why):
    assert bind(request((0, 1, 3)), held, (1.0,) * 3) is None, why


def test_a_swap_that_leaves_a_gpu_with_fewer_cpus_than_its_workers_need_is_not_bound():
    wanted = request((0, 1), cpus=(2.0, 0.5))
    assert bind(wanted, probes(1, 0), (2.0, 0.5)) is None
    assert bind(wanted, probes(0, 1), (2.0, 0.5)) == {0: 0, 1: 1}


def test_a_gpu_another_job_holds_is_refused_naming_component_index_offer_and_remedy():
    wanted = NodeRequest(1, 4, (0, 3), (1.0, 1.0), (("env",), ("actor", "rollout")))
    message = str(unobtainable(wanted, [3], [0, 1, 2], "abcdef0123"))
    assert message.startswith("cluster.component_placement: GPU 7 (actor, rollout) cannot be")
    assert "another job holds it on node rank 1 (Ray node abcdef01)" in message
    assert "Ray could give GPUs 4-6 there" in message
    assert message.endswith("Free it, or place actor, rollout on GPUs that are free")


def _gap_reports(actor_gpu: int = 3, env_node: str = "n1") -> list:
    plan = plan_gpu_placement(*GAP, ONE_BY_FOUR)
    return [
        ("env", plan["env"], 0, DeviceReport("env", 0, env_node, (), "", "cpu", 1)),
        ("rollout", plan["rollout"], 0, gpu_report("n1", 1)),
        ("actor", plan["actor"], 0, gpu_report("n1", actor_gpu)),
    ]


def test_workers_on_their_planned_gpus_and_node_pass():
    check_device_reports(_gap_reports())
    check_device_reports(_gap_reports(), {0: "n1"})


def test_a_worker_on_another_gpu_than_its_index_names_is_caught():
    # the report's case: Ray gave the actor planned on GPU 3 the lowest free GPU, 2
    with pytest.raises(PlacementError) as info:
        check_device_reports(_gap_reports(actor_gpu=2))
    message = str(info.value)
    assert "actor worker 0 (planned on GPU 3: GPU 3 of node rank 0)" in message
    assert "Ray gave it GPU ids [2]" in message


def test_a_worker_given_no_gpu_it_reserved_is_caught():
    plan = plan_gpu_placement(*GAP, ONE_BY_FOUR)
    with pytest.raises(PlacementError, match=r"rollout worker 0 .* reserved 1 GPU .* ids \[\]"):
        check_device_reports([("rollout", plan["rollout"], 0, gpu_report("n1"))])


def test_a_worker_without_gpu_is_checked_for_its_node():
    with pytest.raises(PlacementError, match=r"env worker 0 .* runs on Ray node n2, but node rank"):
        check_device_reports(_gap_reports(env_node="n2"), {0: "n1"})
    with pytest.raises(
        PlacementError, match=r"env worker 0 .* on Ray node n1, but node rank 0 is node n0"
    ):
        check_device_reports(_gap_reports(), {0: "n0"})


def test_node_ranks_sharing_a_node_are_caught():
    plan = plan_gpu_placement({"actor": "0-3", "env": "0"}, {"env": 1, "actor": 4}, TWO_BY_TWO)
    reports = [("actor", plan["actor"], rank, gpu_report("n1", rank % 2)) for rank in range(4)]
    with pytest.raises(PlacementError, match=r"node ranks 0, 1 of the placement run on one Ray"):
        check_device_reports(reports)
    reports[2] = reports[2][:3] + (gpu_report("n2", 0),)
    with pytest.raises(PlacementError, match=r"actor worker 3 .* node n1, but node rank 1 is"):
        check_device_reports(reports)
