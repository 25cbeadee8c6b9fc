"""Planning a GPU placement: which GPU each worker lives with and what it reserves (pure).

``cluster.component_placement`` indices are GPUs, numbered across nodes (index ``i`` is GPU
``i % gpus_per_node`` of node ``i // gpus_per_node``), RLinf's way. For each group of ``n``
workers placed on ``s`` GPUs:

* ``n == s``: one worker per GPU; ``n`` a multiple of ``s``: ``n / s`` workers per GPU
  (never for trainer ranks: NCCL takes one rank per GPU); ``n < s``: the first ``n`` GPUs
  (a warning unless the set is ``all``).
* Groups whose sets overlap are collocated and share those GPUs; every GPU-taking worker on
  a GPU gets an even share of it unless ``cluster.gpus_per_worker`` fixes its share.
* Env workers (and attached helpers such as the replay buffer) reserve no GPU but run on
  the node of their GPU index; each node's CPUs are split among the workers on it.

The plan is checked against the cluster's shape before any worker starts:
:class:`~infra.cluster.placement.PlacementError` names the component, the indices and what exists.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass

from infra.cluster.placement import GroupPlacement, PlacementError, format_indices, require_placed
from rl_core.config.placement import GPU_TAKERS, component_specs, parse_cpu_set

logger = logging.getLogger(__name__)

#: The config field that sets each component's worker count (for messages).
WORKER_COUNT_FIELDS = {
    "actor": "actor.num_workers",
    "rollout": "rollout.num_workers",
    "env": "env.num_workers",
}
#: Components whose workers are trainer ranks (one GPU each, NCCL).
TRAINER_COMPONENTS = ("actor",)
#: Fraction of a node's CPUs the plan reserves (the rest absorbs rounding).
CPU_SAFETY = 0.99


@dataclass(frozen=True)
class GpuCluster:
    """The shape a GPU placement is planned for.

    Attributes:
        num_nodes: Nodes the placement spans (``cluster.num_nodes``).
        gpus_per_node: GPUs of each node.
        cpus_per_node: CPUs of each node (the smallest node's, when they differ).
    """

    num_nodes: int
    gpus_per_node: int
    cpus_per_node: float

    @property
    def total_gpus(self) -> int:
        """GPUs the placement may use."""
        return self.num_nodes * self.gpus_per_node

    def describe(self) -> str:
        """``8 GPUs (2 node(s) x 4)``."""
        gpus = "1 GPU" if self.total_gpus == 1 else f"{self.total_gpus} GPUs"
        return f"{gpus} ({self.num_nodes} node(s) x {self.gpus_per_node})"


@dataclass(frozen=True)
class Attached:
    """A helper worker that lives with rank 0 of another group (e.g. the replay buffer).

    Attributes:
        anchor: The group whose rank 0's GPU (and node) it shares.
        num_cpus: Its CPU reservation (it reserves no GPU).
    """

    anchor: str
    num_cpus: float


def _floor4(value: float) -> float:
    return math.floor(value * 10_000) / 10_000


def _index_sets(
    placement: dict[str, str | int], groups: list[str], cluster: GpuCluster
) -> dict[str, tuple[tuple[int, ...], bool]]:
    """``{component: (GPU indices, placed on 'all')}`` checked against the cluster."""
    specs = component_specs(placement)
    require_placed(groups, specs, "GPUs")
    total = cluster.total_gpus
    sets = {}
    for name in groups:
        spec = specs[name]
        indices = tuple(range(total)) if spec == "all" else parse_cpu_set(spec)
        bad = [i for i in indices if i >= total]
        if bad:
            raise PlacementError(
                f"cluster.component_placement.{name}: GPU index {bad[0]} (in "
                f"{format_indices(indices)}) does not exist: the cluster has "
                f"{cluster.describe()}; allowed GPU indices 0-{total - 1}"
            )
        sets[name] = (indices, spec == "all")
    return sets


def _assign(name: str, size: int, indices: tuple[int, ...], everything: bool) -> list[int]:
    """The GPU index of each of ``size`` workers placed on ``indices``."""
    count = len(indices)
    if size < count:
        if not everything and name != "ref":
            logger.warning(
                "%s: %d worker(s) on %d GPUs (%s): GPUs %s stay unused",
                name,
                size,
                count,
                format_indices(indices),
                format_indices(indices[size:]),
            )
        return list(indices[:size])
    if size % count:
        field = WORKER_COUNT_FIELDS.get(name, f"the {name} workers")
        raise PlacementError(
            f"cluster.component_placement.{name}: {size} workers do not divide evenly over "
            f"{count} GPUs ({format_indices(indices)}); set {field} to a multiple of {count}"
        )
    per_gpu = size // count
    if per_gpu > 1 and name in TRAINER_COMPONENTS:
        raise PlacementError(
            f"cluster.component_placement.{name}: {size} trainer ranks on {count} GPUs "
            f"({format_indices(indices)}); each trainer rank needs a GPU of its own (NCCL); "
            f"place {name} on {size} GPUs or set {WORKER_COUNT_FIELDS[name]}={count}"
        )
    return [indices[w // per_gpu] for w in range(size)]


def _gpu_shares(assigned: dict[str, list[int]], explicit: dict[str, float]) -> dict[str, float]:
    """GPUs each worker of each group reserves: fixed shares first, the rest split evenly."""
    fixed: dict[int, float] = defaultdict(float)
    free: dict[int, int] = defaultdict(int)
    takers = {}
    for name, gpus in assigned.items():
        share = explicit.get(name)
        takes = share is None and name in GPU_TAKERS
        takers[name] = takes
        for gpu in gpus:
            if share is not None:
                fixed[gpu] += share
            elif takes:
                free[gpu] += 1
    for gpu, amount in fixed.items():
        if amount > 1.0 + 1e-9:
            names = sorted(n for n, g in assigned.items() if gpu in g and n in explicit)
            parts = " + ".join(f"{n} {explicit[n]:g}" for n in names)
            raise PlacementError(
                f"GPU {gpu} is reserved more than once: cluster.gpus_per_worker {parts} per "
                "worker add up to more than 1 GPU (lower the shares or place them apart)"
            )
    shares = {}
    for name, gpus in assigned.items():
        if not takers[name]:
            shares[name] = float(explicit.get(name, 0.0))
            continue
        share = min((1.0 - fixed[g]) / free[g] for g in gpus)
        if share <= 1e-4:
            raise PlacementError(
                f"{name} workers get no share of GPUs {format_indices(sorted(set(gpus)))}: "
                "cluster.gpus_per_worker of the components collocated with them take it all"
            )
        shares[name] = _floor4(share)
    return shares


def _check_tensor_groups(assigned: list[int], gpus_per_node: int, tensor_parallel: int) -> None:
    """Ranks of one tensor-parallel group must sit on one node."""
    for first in range(0, len(assigned), tensor_parallel):
        gpus = assigned[first : first + tensor_parallel]
        nodes = sorted({g // gpus_per_node for g in gpus})
        if len(nodes) > 1:
            raise PlacementError(
                f"actor ranks {first}-{first + tensor_parallel - 1} form a tensor-parallel "
                f"group but sit on nodes {', '.join(map(str, nodes))} (GPUs "
                f"{format_indices(gpus)}); place the actor so that each group of "
                f"{tensor_parallel} ranks is on one node ({gpus_per_node} GPUs per node)"
            )


def plan_gpu_placement(
    placement: dict[str, str | int],
    group_sizes: dict[str, int],
    cluster: GpuCluster,
    gpus_per_worker: dict[str, float] | None = None,
    attached: dict[str, Attached] | None = None,
    tensor_parallel: int = 1,
    free_cpus: float = 0.0,
) -> dict[str, GroupPlacement]:
    """Plan a GPU placement of each worker group.

    Args:
        placement: ``cluster.component_placement`` (GPU indices; ``all`` = every GPU).
        group_sizes: Workers per component, e.g. ``{"env": 2, "actor": 4}``.
        cluster: The cluster's shape.
        gpus_per_worker: ``cluster.gpus_per_worker`` (fixed shares per component).
        attached: Helper groups of one worker placed with another group's rank 0.
        tensor_parallel: Trainer ranks per tensor-parallel group (kept on one node).
        free_cpus: CPUs the workers leave free on the first node, for the run's processes
            outside its worker groups (the replicas of an online run's policy server).

    Raises:
        PlacementError: An index beyond the cluster, a group without a placement, workers
            that do not divide over their GPUs, two trainer ranks on one GPU, GPUs reserved
            more than once, a tensor-parallel group across nodes.
    """
    explicit = dict(gpus_per_worker or {})
    attached = dict(attached or {})
    sets = _index_sets(placement, list(group_sizes), cluster)
    assigned = {name: _assign(name, size, *sets[name]) for name, size in group_sizes.items()}
    for name, helper in attached.items():
        assigned[name] = [assigned[helper.anchor][0]]
    if tensor_parallel > 1 and "actor" in assigned:
        _check_tensor_groups(assigned["actor"], cluster.gpus_per_node, tensor_parallel)
    shares = _gpu_shares({n: g for n, g in assigned.items() if n not in attached}, explicit)
    # CPUs: each node's share after the attached helpers' fixed reservations.
    per_node = cluster.gpus_per_node
    fixed_cpus: dict[int, float] = defaultdict(float)
    fixed_cpus[0] = free_cpus
    counts: dict[int, int] = defaultdict(int)
    for name, gpus in assigned.items():
        for gpu in gpus:
            if name in attached:
                fixed_cpus[gpu // per_node] += attached[name].num_cpus
            else:
                counts[gpu // per_node] += 1
    budget = cluster.cpus_per_node * CPU_SAFETY
    plan = {}
    for name, gpus in assigned.items():
        if name in attached:
            cpus, gpu_share = attached[name].num_cpus, 0.0
        else:
            nodes = {g // per_node for g in gpus}
            cpus = _floor4(min((budget - fixed_cpus[n]) / counts[n] for n in nodes))
            gpu_share = shares[name]
        if cpus <= 0:
            raise PlacementError(
                f"{name} workers get no CPU: {cluster.cpus_per_node:g} CPUs per node cannot "
                "host the workers placed there"
            )
        plan[name] = GroupPlacement(
            cpus=(),
            num_cpus_per_worker=cpus,
            num_gpus_per_worker=gpu_share,
            worker_gpus=tuple(gpus),
            gpus_per_node=per_node,
            hide_gpus=gpu_share == 0.0,
        )
    return plan
