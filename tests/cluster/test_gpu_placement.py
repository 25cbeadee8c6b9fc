"""GPU placements on one node with 4 logical GPUs (``ray.init(num_gpus=4)``): every worker
gets the GPU its placement names (Ray's GPU ids and ``CUDA_VISIBLE_DEVICES``), also when the
placement skips GPUs (Ray hands out the lowest free ones first), collocated workers share
it, disaggregated ones do not, trainer ranks never share one, and a placement the cluster
cannot host, or naming a GPU another job holds, is refused before any worker starts.

The GPUs are Ray's logical ones (this machine has none), so ``RLPIPE_ALLOW_LOGICAL_GPUS=1``
lets the workers compute on the CPU; which GPU Ray assigned them is what is checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import ray

from infra.cluster.cluster_placement import place
from infra.cluster.devices import ALLOW_LOGICAL_GPUS_VAR
from infra.cluster.placement import PlacementError
from infra.cluster.worker_group import WorkerGroup
from infra.cost import CostMeter, reserved_resources
from rl_core.config import load_config
from tests.toy_workers import ToyWorker

pytestmark = pytest.mark.integration

#: (placement overrides, workers per group, GPU index of each group's workers).
LAYOUTS = {
    "collocated": (
        ["cluster.component_placement={env: 0, 'actor,rollout': 1-2}"],
        {"env": 1, "rollout": 2, "actor": 2},
        {"env": [0], "rollout": [1, 2], "actor": [1, 2]},
    ),
    "disaggregated": (
        ["cluster.component_placement={'env,rollout': 2-3, actor: 0-1}"],
        {"env": 2, "rollout": 2, "actor": 2},
        {"env": [2, 3], "rollout": [2, 3], "actor": [0, 1]},
    ),
    # GPU 2 is skipped: Ray's first bundles hold 0-2, the actor must still get 3
    "gap": (
        ["cluster.component_placement={actor: 3, rollout: 1, env: 0}"],
        {"env": 1, "rollout": 1, "actor": 1},
        {"env": [0], "rollout": [1], "actor": [3]},
    ),
    "gap below the trainer": (
        ["cluster.component_placement={actor: 2-3, 'rollout,env': 0}"],
        {"env": 1, "rollout": 1, "actor": 2},
        {"env": [0], "rollout": [0], "actor": [2, 3]},
    ),
    # a set written backwards (ranks follow the GPUs' order), shared, with a gap
    "collocated on 3,1": (
        ["cluster.component_placement={'actor,rollout': '3,1', env: 0}"],
        {"env": 1, "rollout": 2, "actor": 2},
        {"env": [0], "rollout": [1, 3], "actor": [1, 3]},
    ),
    # two groups interleaved over every GPU: Ray holds 0-3, each index finds its own
    "interleaved": (
        ["cluster.component_placement={actor: '0,2', rollout: '1,3', env: 3}"],
        {"env": 1, "rollout": 2, "actor": 2},
        {"env": [3], "rollout": [1, 3], "actor": [0, 2]},
    ),
}
# (the hybrid engine's layout, one trainer rank per GPU: test_gpu_placement_two_nodes.py)


@pytest.fixture(scope="module")
def four_gpus() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs and 4 logical GPUs."""
    from infra.cluster.ray_cluster import connect, shutdown

    os.environ[ALLOW_LOGICAL_GPUS_VAR] = "1"
    connect(num_cpus=2, num_gpus=4)
    yield
    shutdown()
    os.environ.pop(ALLOW_LOGICAL_GPUS_VAR, None)


def live_placement_groups() -> set[str]:
    """Ids of the placement groups not removed (reserved, or waiting for resources)."""
    table = ray.util.placement_group_table()
    return {pg_id for pg_id, info in table.items() if info["state"] != "REMOVED"}


def reserved_ids(plan) -> set[str]:
    return {pg.id.hex() for pg in plan.reserved}


def start_groups(plan, sizes) -> list[WorkerGroup]:
    config = load_config("ppo_cartpole").model_dump(mode="json")
    groups = [
        WorkerGroup(name, ToyWorker, size, plan[name], lambda r: (config, r))
        for name, size in sizes.items()
    ]
    for group in groups:
        group.wait_started(120)
    return groups


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_worker_gets_the_gpu_its_placement_names(four_gpus, layout) -> None:
    overrides, sizes, expected = LAYOUTS[layout]
    cfg = load_config("ppo_cartpole", overrides)
    before = live_placement_groups()
    plan = place(cfg, sizes)
    assert plan.device == "cuda"
    used = {g for gpus in expected.values() for g in gpus}
    # the run holds one bundle per planned GPU and nothing else (no filler left)
    assert live_placement_groups() - before == reserved_ids(plan)
    assert sum(pg.bundle_count for pg in plan.reserved) == len(used)
    groups = start_groups(plan, sizes)
    try:
        reports = plan.check_workers(groups)
        # ToyWorker reports its group as "toy": the reports come group by group, in order
        for group, size in zip(groups, sizes.values(), strict=True):
            mine, reports = reports[:size], reports[size:]
            gpus = expected[group.name]
            if group.placement.num_gpus_per_worker:
                assert [r.gpu_ids for r in mine] == [(g,) for g in gpus]
                assert [r.cuda_visible_devices for r in mine] == [str(g) for g in gpus]
            else:  # env workers reserve no GPU and see none
                assert [r.gpu_ids for r in mine] == [()] * size
                assert [r.cuda_visible_devices for r in mine] == [""] * size
            if group.name == "actor":  # no two trainer ranks on one GPU
                assert len({r.gpu_ids for r in mine}) == size
            assert all(r.device == "cpu" for r in mine)  # logical GPUs: computes on the CPU
        # reserved GPUs x wall time: one hour of update costs one GPU-hour per reserved GPU
        reserved = reserved_resources(groups)
        assert reserved["GPU"] == len(used)
        cost = CostMeter(reserved).add_iteration({"time/update": 3600.0}, samples=1)
        assert cost["cost/gpu_hours_update"] == pytest.approx(len(used))
    finally:
        for group in groups:
            group.shutdown()
        plan.release()


def test_trainer_ranks_never_share_a_gpu(four_gpus) -> None:
    cfg = load_config("ppo_cartpole", ["cluster.component_placement={'env,rollout,actor': 0-1}"])
    with pytest.raises(PlacementError, match=r"4 trainer ranks on 2 GPUs \(0-1\)"):
        place(cfg, {"env": 1, "actor": 4})


def test_a_placement_beyond_the_cluster_fails_before_any_worker_starts(four_gpus) -> None:
    cfg = load_config(
        "ppo_cartpole", ["cluster.component_placement={'env,rollout': 0, actor: 2-5}"]
    )
    before = live_placement_groups()
    with pytest.raises(PlacementError) as info:
        place(cfg, {"env": 1, "rollout": 1, "actor": 4})
    message = str(info.value)
    assert "cluster.component_placement.actor: GPU index 4 (in 2-5) does not exist" in message
    assert "4 GPUs (1 node(s) x 4)" in message
    assert live_placement_groups() == before  # nothing reserved


def test_gpus_held_by_another_job_are_reported_and_nothing_stays_reserved(four_gpus) -> None:
    from ray.util.placement_group import placement_group, remove_placement_group

    other = placement_group([{"GPU": 1.0}, {"GPU": 1.0}], strategy="STRICT_PACK")
    ray.get(other.ready(), timeout=30)
    before = live_placement_groups()
    try:
        cfg = load_config("ppo_cartpole", ["timeouts.worker_start=3"])
        with pytest.raises(PlacementError, match=r"could not reserve the placement's GPUs"):
            place(cfg, {"env": 1, "actor": 4})
        assert live_placement_groups() == before  # only the other job's
    finally:
        remove_placement_group(other)


@pytest.fixture
def gpu_3_held_by_another_job(four_gpus) -> Iterator[None]:
    """A placement group of another job holding GPU 3 (it got 3 while 0-2 were taken)."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_gpus=1, num_cpus=0)
    def gpu_ids() -> list[int]:
        return [int(g) for g in ray.get_gpu_ids()]

    lower = placement_group([{"GPU": 1.0}] * 3)
    assert lower.wait(30)
    other = placement_group([{"GPU": 1.0}])
    try:
        assert other.wait(30)
        inside = PlacementGroupSchedulingStrategy(other, placement_group_bundle_index=0)
        assert ray.get(gpu_ids.options(scheduling_strategy=inside).remote(), timeout=60) == [3]
    finally:
        remove_placement_group(lower)
    yield
    remove_placement_group(other)


def test_a_gpu_another_job_holds_is_refused_and_nothing_stays_reserved(
    gpu_3_held_by_another_job, monkeypatch
) -> None:
    import infra.cluster.gpu_reserve as gpu_reserve

    monkeypatch.setattr(gpu_reserve, "EXACT_WAIT_S", 2.0)
    cfg = load_config("ppo_cartpole", LAYOUTS["gap"][0])
    before = live_placement_groups()
    with pytest.raises(PlacementError) as info:
        place(cfg, LAYOUTS["gap"][1])
    assert str(info.value) == (
        "cluster.component_placement: GPU 3 (actor) cannot be reserved: another job holds "
        f"it on node rank 0 (Ray node {ray.get_runtime_context().get_node_id()[:8]}); Ray "
        "could give GPUs 0-2 there. Free it, or place actor on GPUs that are free"
    )
    assert live_placement_groups() == before  # no bundle, no filler left


def test_device_cpu_on_a_gpu_cluster_reserves_no_gpu_and_hides_them(four_gpus) -> None:
    cfg = load_config("ppo_cartpole", ["cluster.device=cpu"])
    sizes = {"env": 1, "actor": 1}
    plan = place(cfg, sizes)
    assert plan.device == "cpu" and not plan.reserved
    groups = start_groups(plan, sizes)
    try:
        reports = plan.check_workers(groups)
        assert [(r.gpu_ids, r.cuda_visible_devices, r.device) for r in reports] == [
            ((), "", "cpu")
        ] * 2
        assert reserved_resources(groups)["GPU"] == 0
    finally:
        for group in groups:
            group.shutdown()
