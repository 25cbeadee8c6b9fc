"""Turning ``cluster.component_placement`` into Ray actor options and CPU affinity."""

from __future__ import annotations

from dataclasses import dataclass

from rl_core.config.placement import parse_component_placement


class PlacementError(ValueError):
    """The placement does not fit the cluster."""


@dataclass(frozen=True)
class GroupPlacement:
    """Where one worker group runs.

    Attributes:
        cpus: CPU indices the group's processes are pinned to (on their node).
        num_cpus_per_worker: Ray ``num_cpus`` reservation of each worker (fractional when
            groups share CPUs).
    """

    cpus: tuple[int, ...]
    num_cpus_per_worker: float

    @property
    def mode(self) -> str:
        """Human-readable description."""
        return f"cpus {','.join(map(str, self.cpus))} ({self.num_cpus_per_worker:.3g} each)"


def plan_placement(
    placement: dict[str, str | int], group_sizes: dict[str, int], cluster_cpus: int
) -> dict[str, GroupPlacement]:
    """Plan placement of each worker group.

    Groups whose CPU sets overlap share those CPUs (collocated); the reservation of every
    worker is its share of its CPU set so that all groups fit at once.

    Args:
        placement: ``cluster.component_placement`` (``"all"`` = every CPU).
        group_sizes: Workers per component, e.g. ``{"env": 1, "rollout": 1, "actor": 1}``.
        cluster_cpus: CPUs available in the cluster.

    Raises:
        PlacementError: A CPU index outside the cluster, or a group without a placement.
    """
    every = f"0-{cluster_cpus - 1}"
    expanded = {k: (every if v == "all" else v) for k, v in placement.items()}
    cpu_sets = parse_component_placement(expanded)
    missing = [g for g in group_sizes if g not in cpu_sets]
    if missing:
        raise PlacementError(
            f"cluster.component_placement places no CPUs for {', '.join(missing)}; "
            f"add e.g. '{','.join(missing)}: all'"
        )
    for name, cpus in cpu_sets.items():
        bad = [c for c in cpus if c >= cluster_cpus]
        if bad:
            raise PlacementError(
                f"cluster.component_placement.{name} uses CPU {bad[0]} but the cluster has "
                f"{cluster_cpus} CPUs (allowed 0-{cluster_cpus - 1})"
            )
    # Workers competing for each CPU, to split reservations fairly.
    load = {c: 0.0 for c in range(cluster_cpus)}
    for name, n in group_sizes.items():
        for c in cpu_sets[name]:
            load[c] += n / len(cpu_sets[name])
    plan = {}
    for name, n in group_sizes.items():
        cpus = cpu_sets[name]
        share = sum(1.0 / max(load[c], 1.0) for c in cpus) * (n / len(cpus)) / n
        # Slightly under-reserve so floating-point sums never exceed the cluster.
        plan[name] = GroupPlacement(cpus, round(share * 0.99, 4))
    return plan
