"""Turning ``cluster.component_placement`` into Ray actor options and CPU affinity.

This module plans CPU placements and describes any group's placement
(:class:`GroupPlacement`); :mod:`infra.cluster.gpu_placement` plans GPU placements and
:mod:`infra.cluster.cluster_placement` chooses between them and reserves the GPUs in Ray.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Any

from rl_core.config.placement import parse_component_placement


class PlacementError(ValueError):
    """The placement does not fit the cluster."""


@dataclass(frozen=True)
class GroupPlacement:
    """Where one worker group runs.

    Attributes:
        cpus: CPU indices the group's processes are pinned to (on their node); empty in a
            GPU placement (Ray's bundles place the processes, nothing is pinned).
        num_cpus_per_worker: Ray ``num_cpus`` reservation of each worker (fractional when
            groups share CPUs).
        num_gpus_per_worker: Ray ``num_gpus`` reservation of each worker (fractional when
            workers share a GPU; 0: the worker computes on the CPU).
        worker_gpus: GPU placement: the GPU index (``cluster.component_placement``
            numbering, across nodes) each worker lives with, rank by rank; a worker that
            reserves no GPU still runs on that GPU's node.
        gpus_per_node: GPU placement: GPUs per node (index ``i`` is on node
            ``i // gpus_per_node``); 0 for a CPU placement.
        scheduling: Ray scheduling strategy of each worker (the placement-group bundle of
            its GPU), filled in once the bundles are reserved.
        hide_gpus: The workers must not see the node's GPUs (they reserve none on a
            cluster that has some): ``CUDA_VISIBLE_DEVICES`` is emptied for them.
    """

    cpus: tuple[int, ...]
    num_cpus_per_worker: float
    num_gpus_per_worker: float = 0.0
    worker_gpus: tuple[int, ...] = ()
    gpus_per_node: int = 0
    scheduling: tuple[Any, ...] = field(default=(), compare=False)
    hide_gpus: bool = False

    @property
    def on_gpus(self) -> bool:
        """Whether this is a GPU placement (indices are GPUs)."""
        return bool(self.worker_gpus)

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """The GPUs the group's workers live with (reserved for the run), sorted."""
        return tuple(sorted(set(self.worker_gpus)))

    def node_of(self, rank: int) -> int:
        """Node rank of worker ``rank`` in a GPU placement (0 for a CPU placement)."""
        return self.worker_gpus[rank] // self.gpus_per_node if self.on_gpus else 0

    @property
    def mode(self) -> str:
        """Human-readable description."""
        if not self.on_gpus:
            return f"cpus {','.join(map(str, self.cpus))} ({self.num_cpus_per_worker:.3g} each)"
        gpus = format_indices(self.gpu_indices)
        if self.num_gpus_per_worker:
            return (
                f"GPUs {gpus} ({self.num_gpus_per_worker:.4g} GPU, "
                f"{self.num_cpus_per_worker:.3g} CPU each)"
            )
        return f"the nodes of GPUs {gpus} (no GPU, {self.num_cpus_per_worker:.3g} CPU each)"

    def actor_options(self, rank: int) -> dict[str, Any]:
        """Ray actor options of worker ``rank``: reservations and, on GPUs, its bundle."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus_per_worker}
        if self.num_gpus_per_worker:
            options["num_gpus"] = self.num_gpus_per_worker
        if self.scheduling:
            options["scheduling_strategy"] = self.scheduling[rank]
        if self.hide_gpus:
            options["runtime_env"] = {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}
        return options


def format_indices(indices: tuple[int, ...] | list[int]) -> str:
    """``(0, 1, 2, 5)`` → ``0-2,5``."""
    parts: list[str] = []
    items = sorted(indices)
    start = prev = None
    for i in [*items, None]:
        if start is None:
            start = prev = i
            continue
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(parts)


def require_placed(groups: Iterable[str], placed: Container[str], what: str) -> None:
    """Every group must have a placement.

    Raises:
        PlacementError: Names the groups without one and how to add them.
    """
    missing = [g for g in groups if g not in placed]
    if missing:
        raise PlacementError(
            f"cluster.component_placement places no {what} for {', '.join(missing)}; "
            f"add e.g. '{','.join(missing)}: all'"
        )


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
    require_placed(group_sizes, cpu_sets, "CPUs")
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
