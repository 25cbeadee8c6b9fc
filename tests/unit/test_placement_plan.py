"""plan_placement: CPU sets and Ray reservations of worker groups (pure, no Ray)."""

import pytest

from infra.cluster.placement import GroupPlacement, PlacementError, plan_placement

GROUPS = {"env": 1, "rollout": 1, "actor": 1}


def total_reservation(plan, group_sizes):
    return sum(plan[name].num_cpus_per_worker * n for name, n in group_sizes.items())


def test_collocated_all_fits_two_cpus():
    plan = plan_placement({"env,rollout,actor": "all"}, GROUPS, cluster_cpus=2)
    assert set(plan) == set(GROUPS)
    for group in plan.values():
        assert isinstance(group, GroupPlacement)
        assert group.cpus == (0, 1)
        assert group.num_cpus_per_worker > 0
    total = total_reservation(plan, GROUPS)
    assert total <= 2
    # each of the 3 workers gets about a third of the 2 CPUs (0.99 safety factor)
    assert plan["actor"].num_cpus_per_worker == pytest.approx(2 / 3 * 0.99, abs=1e-4)
    assert total == pytest.approx(1.98, abs=1e-3)


def test_collocated_many_workers_never_exceed_cluster():
    sizes = {"env": 3, "rollout": 2, "actor": 1}
    plan = plan_placement({"env,rollout,actor": "all"}, sizes, cluster_cpus=4)
    assert total_reservation(plan, sizes) <= 4


def test_disaggregated_cpu_sets():
    plan = plan_placement({"actor": "1", "env,rollout": "0"}, GROUPS, cluster_cpus=2)
    assert plan["actor"].cpus == (1,)
    assert plan["env"].cpus == (0,)
    assert plan["rollout"].cpus == (0,)
    # actor has CPU 1 to itself; env and rollout share CPU 0
    assert plan["actor"].num_cpus_per_worker == pytest.approx(0.99)
    assert plan["env"].num_cpus_per_worker == pytest.approx(0.495)
    assert plan["rollout"].num_cpus_per_worker == pytest.approx(0.495)
    assert total_reservation(plan, GROUPS) <= 2
    assert plan["actor"].mode == "cpus 1 (0.99 each)"


def test_cpu_beyond_cluster_names_field():
    with pytest.raises(PlacementError) as info:
        plan_placement({"actor": "0-3", "env,rollout": "0"}, GROUPS, cluster_cpus=2)
    msg = str(info.value)
    assert "cluster.component_placement.actor" in msg
    assert "CPU 2" in msg
    assert "2 CPUs" in msg and "allowed 0-1" in msg


def test_component_without_placement():
    with pytest.raises(PlacementError) as info:
        plan_placement({"env,rollout": "0"}, GROUPS, cluster_cpus=2)
    msg = str(info.value)
    assert "places no CPUs for actor" in msg
    assert "cluster.component_placement" in msg


def test_malformed_cpu_set_rejected():
    with pytest.raises(ValueError, match="bad index set '3-1'"):
        plan_placement({"env,rollout,actor": "3-1"}, GROUPS, cluster_cpus=4)
