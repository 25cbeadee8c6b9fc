"""plan_gpu_placement: which GPU each worker lives with and what it reserves (pure, no Ray)."""

from __future__ import annotations

import logging

import pytest

from infra.cluster.gpu_placement import Attached, GpuCluster, plan_gpu_placement
from infra.cluster.placement import PlacementError

ONE_BY_FOUR = GpuCluster(num_nodes=1, gpus_per_node=4, cpus_per_node=16)
TWO_BY_TWO = GpuCluster(num_nodes=2, gpus_per_node=2, cpus_per_node=8)


def test_collocated_groups_share_each_gpu_evenly_and_env_takes_none():
    plan = plan_gpu_placement(
        {"actor,rollout": "0-3", "env": "0-3"},
        {"env": 2, "rollout": 4, "actor": 4},
        ONE_BY_FOUR,
    )
    assert plan["actor"].worker_gpus == (0, 1, 2, 3)
    assert plan["rollout"].worker_gpus == (0, 1, 2, 3)
    assert plan["actor"].num_gpus_per_worker == 0.5
    assert plan["rollout"].num_gpus_per_worker == 0.5
    assert plan["env"].worker_gpus == (0, 1)
    assert plan["env"].num_gpus_per_worker == 0.0
    assert plan["env"].hide_gpus and not plan["actor"].hide_gpus
    # 10 workers on the node share its 16 CPUs (less 1 %)
    assert plan["actor"].num_cpus_per_worker == pytest.approx(16 * 0.99 / 10, abs=1e-4)
    assert plan["actor"].actor_options(2) == {"num_cpus": 1.584, "num_gpus": 0.5}
    assert plan["env"].actor_options(0)["runtime_env"] == {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}


def test_disaggregated_groups_get_disjoint_whole_gpus():
    plan = plan_gpu_placement(
        {"actor": "0-1", "rollout": "2-3", "env": "2"},
        {"env": 1, "rollout": 2, "actor": 2},
        ONE_BY_FOUR,
    )
    assert plan["actor"].worker_gpus == (0, 1)
    assert plan["rollout"].worker_gpus == (2, 3)
    assert plan["actor"].num_gpus_per_worker == plan["rollout"].num_gpus_per_worker == 1.0
    assert set(plan["actor"].worker_gpus).isdisjoint(plan["rollout"].worker_gpus)


def test_the_hybrid_engine_gives_each_trainer_rank_a_whole_gpu():
    plan = plan_gpu_placement({"actor,rollout": "all"}, {"actor": 4}, ONE_BY_FOUR)
    assert plan["actor"].worker_gpus == (0, 1, 2, 3)
    assert plan["actor"].num_gpus_per_worker == 1.0


def test_several_rollout_workers_may_share_a_gpu():
    plan = plan_gpu_placement(
        {"actor": "0", "rollout": "1", "env": "1"},
        {"env": 1, "rollout": 4, "actor": 1},
        ONE_BY_FOUR,
    )
    assert plan["rollout"].worker_gpus == (1, 1, 1, 1)
    assert plan["rollout"].num_gpus_per_worker == 0.25


def test_indices_count_across_nodes():
    plan = plan_gpu_placement(
        {"actor": "0-3", "env,rollout": "all"}, {"env": 2, "rollout": 2, "actor": 4}, TWO_BY_TWO
    )
    assert [plan["actor"].node_of(r) for r in range(4)] == [0, 0, 1, 1]
    assert plan["rollout"].worker_gpus == (0, 1)


def test_tensor_parallel_peers_stay_on_one_node():
    plan = plan_gpu_placement(
        {"actor,rollout": "0-3", "env": "0"},
        {"env": 1, "actor": 4},
        TWO_BY_TWO,
        tensor_parallel=2,
    )
    assert plan["actor"].node_of(0) == plan["actor"].node_of(1) == 0
    assert plan["actor"].node_of(2) == plan["actor"].node_of(3) == 1
    with pytest.raises(
        PlacementError, match=r"ranks 0-1 form a tensor-parallel group .*nodes 0, 1"
    ):
        plan_gpu_placement(
            {"actor,rollout": "1,2", "env": "0"},
            {"env": 1, "actor": 2},
            TWO_BY_TWO,
            tensor_parallel=2,
        )


def test_two_trainer_ranks_never_share_a_gpu():
    with pytest.raises(PlacementError) as info:
        plan_gpu_placement({"actor,rollout,env": "0-1"}, {"env": 1, "actor": 4}, ONE_BY_FOUR)
    message = str(info.value)
    assert "4 trainer ranks on 2 GPUs (0-1)" in message
    assert "actor.num_workers=2" in message


def test_a_gpu_the_cluster_lacks_is_refused_naming_component_indices_and_cluster():
    with pytest.raises(PlacementError) as info:
        plan_gpu_placement(
            {"actor": "2-5", "env,rollout": "0"},
            {"env": 1, "rollout": 1, "actor": 4},
            TWO_BY_TWO,
        )
    message = str(info.value)
    assert "cluster.component_placement.actor: GPU index 4 (in 2-5) does not exist" in message
    assert "4 GPUs (2 node(s) x 2)" in message and "allowed GPU indices 0-3" in message


def test_workers_that_do_not_divide_over_their_gpus_are_refused():
    with pytest.raises(PlacementError, match=r"3 workers do not divide evenly over 2 GPUs"):
        plan_gpu_placement(
            {"actor": "0", "rollout": "1-2", "env": "0"},
            {"env": 1, "rollout": 3, "actor": 1},
            ONE_BY_FOUR,
        )


def test_fixed_shares_and_the_rest_split_evenly():
    plan = plan_gpu_placement(
        {"actor,rollout,env": "0"},
        {"env": 1, "rollout": 2, "actor": 1},
        ONE_BY_FOUR,
        gpus_per_worker={"actor": 0.6},
    )
    assert plan["actor"].num_gpus_per_worker == 0.6
    assert plan["rollout"].num_gpus_per_worker == 0.2
    with pytest.raises(PlacementError, match=r"GPU 0 is reserved more than once: .*actor 0.6"):
        plan_gpu_placement(
            {"actor,rollout,env": "0"},
            {"env": 1, "rollout": 1, "actor": 1},
            ONE_BY_FOUR,
            gpus_per_worker={"actor": 0.6, "rollout": 0.6},
        )


def test_unused_gpus_of_an_explicit_set_are_reported(caplog):
    with caplog.at_level(logging.WARNING, logger="infra.cluster.gpu_placement"):
        plan = plan_gpu_placement({"actor,rollout,env": "0-3"}, {"env": 1, "actor": 2}, ONE_BY_FOUR)
    assert plan["actor"].worker_gpus == (0, 1)
    assert "GPUs 2-3 stay unused" in caplog.text


def test_an_attached_helper_lives_with_rank_zero_of_its_anchor():
    plan = plan_gpu_placement(
        {"actor": "2-3", "env,rollout": "0"},
        {"env": 1, "rollout": 1, "actor": 2},
        ONE_BY_FOUR,
        attached={"replay": Attached("actor", 0.001)},
    )
    assert plan["replay"].worker_gpus == (2,)
    assert plan["replay"].num_gpus_per_worker == 0.0
    assert plan["replay"].num_cpus_per_worker == 0.001
    assert plan["actor"].num_cpus_per_worker == pytest.approx((16 * 0.99 - 0.001) / 4, abs=1e-4)


def test_cpus_left_free_for_processes_outside_the_groups_come_off_the_first_node():
    """An online run's policy server replica needs a CPU the trainer must not reserve."""
    one = plan_gpu_placement({"actor": "0"}, {"actor": 1}, ONE_BY_FOUR, free_cpus=1.0)
    assert one["actor"].num_cpus_per_worker == pytest.approx(16 * 0.99 - 1.0, abs=1e-4)
    # two workers per node: the first node's pair is the tighter one, every rank gets as much
    two = plan_gpu_placement({"actor": "0-3"}, {"actor": 4}, TWO_BY_TWO, free_cpus=1.0)
    assert two["actor"].num_cpus_per_worker == pytest.approx((8 * 0.99 - 1.0) / 2, abs=1e-4)
    with pytest.raises(PlacementError, match="actor workers get no CPU"):
        plan_gpu_placement({"actor": "0"}, {"actor": 1}, TWO_BY_TWO, free_cpus=8.0)
