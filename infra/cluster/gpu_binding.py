"""Binding a GPU placement's indices to the GPUs Ray reserved, and checking it (pure).

Index ``i`` of ``cluster.component_placement`` is GPU ``i % gpus_per_node`` of node rank
``i // gpus_per_node``. Ray does not take requests for particular GPUs: a placement group's
``{"GPU": 1}`` bundles get whichever GPUs of their node are free, lowest ids first.
:mod:`infra.cluster.gpu_reserve` therefore asks each bundle which GPU it holds (a probe
task) and, where that is not the planned one, takes the planned ones; this module is the
logic without Ray: what each node rank asks for (:func:`node_requests`), whether the bundles
hold exactly that (:func:`bind`), the refusal when a GPU cannot be had, and the check of
where the started workers run (:func:`check_device_reports`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from infra.cluster.devices import DeviceReport
from infra.cluster.placement import GroupPlacement, PlacementError, format_indices

#: ``(group name, its placement, rank, the worker's report)`` of one started worker.
PlacedReport = tuple[str, GroupPlacement, int, DeviceReport]


@dataclass(frozen=True)
class NodeRequest:
    """The GPUs one node rank of a GPU placement reserves.

    Attributes:
        node_rank: The node rank (``index // gpus_per_node``).
        gpus_per_node: GPUs per node of the placement.
        gpus: The node's GPU ids it wants (``index % gpus_per_node``), ascending.
        cpus: CPUs of each wanted GPU's bundle (the workers living with it), aligned.
        owners: Components living with each wanted GPU, aligned (for messages).
    """

    node_rank: int
    gpus_per_node: int
    gpus: tuple[int, ...]
    cpus: tuple[float, ...]
    owners: tuple[tuple[str, ...], ...]

    def index(self, gpu: int) -> int:
        """The placement index of this node's GPU ``gpu``."""
        return self.node_rank * self.gpus_per_node + gpu

    def describe(self, gpus: Sequence[int]) -> str:
        """``GPU 3 (actor)``, ``GPUs 1 (rollout), 3 (actor)``: placement indices and users."""
        owners = dict(zip(self.gpus, self.owners, strict=True))
        parts = [f"{self.index(g)} ({', '.join(owners[g])})" for g in sorted(gpus)]
        return ("GPU " if len(parts) == 1 else "GPUs ") + ", ".join(parts)


@dataclass(frozen=True)
class Probe:
    """What a probe task scheduled into one bundle saw.

    Attributes:
        gpu_ids: ``ray.get_gpu_ids()`` inside the bundle (the node's ids).
        node_id: The Ray node id.
    """

    gpu_ids: tuple[int, ...]
    node_id: str


def node_requests(plan: dict[str, GroupPlacement], gpus_per_node: int) -> list[NodeRequest]:
    """What each node rank reserves: one GPU per index a worker lives with, and its CPUs.

    Args:
        plan: The planned groups (GPU placements).
        gpus_per_node: GPUs per node of the placement.
    """
    cpus_at: dict[int, float] = defaultdict(float)
    owners_at: dict[int, list[str]] = defaultdict(list)
    for name, group in plan.items():
        for index in group.worker_gpus:
            cpus_at[index] += group.num_cpus_per_worker
            if name not in owners_at[index]:
                owners_at[index].append(name)
    by_node: dict[int, list[int]] = defaultdict(list)
    for index in sorted(cpus_at):
        by_node[index // gpus_per_node].append(index)
    return [
        NodeRequest(
            node_rank=node,
            gpus_per_node=gpus_per_node,
            gpus=tuple(i % gpus_per_node for i in indices),
            cpus=tuple(round(cpus_at[i] + 1e-4, 4) for i in indices),
            owners=tuple(tuple(owners_at[i]) for i in indices),
        )
        for node, indices in sorted(by_node.items())
    ]


def bind(
    request: NodeRequest, probes: Sequence[Probe], bundle_cpus: Sequence[float]
) -> dict[int, int] | None:
    """Which bundle holds each wanted GPU, if the bundles hold exactly the wanted GPUs.

    Args:
        request: The node rank's wanted GPUs.
        probes: What the probe of each bundle saw, bundle by bundle.
        bundle_cpus: CPUs of each bundle, bundle by bundle.

    Returns:
        ``{wanted GPU id: bundle position}``, or None when the bundles hold other GPUs,
        span nodes, or a bundle holding a wanted GPU has fewer CPUs than its workers need.
    """
    if len({p.node_id for p in probes}) != 1 or any(len(p.gpu_ids) != 1 for p in probes):
        return None
    held = {p.gpu_ids[0]: position for position, p in enumerate(probes)}
    if sorted(held) != sorted(request.gpus):
        return None
    for gpu, cpus in zip(request.gpus, request.cpus, strict=True):
        if bundle_cpus[held[gpu]] + 1e-9 < cpus:
            return None
    return held


def unobtainable(
    request: NodeRequest, missing: Sequence[int], free: Sequence[int], node: str
) -> PlacementError:
    """The refusal of a placement naming GPUs of a node that something else holds.

    Args:
        request: The node rank's wanted GPUs.
        missing: The node's GPU ids that could not be had.
        free: The node's GPU ids Ray could give.
        node: The Ray node id.
    """
    them = "it" if len(missing) == 1 else "them"
    offer = format_indices([request.index(g) for g in free]) or "none"
    owners = dict(zip(request.gpus, request.owners, strict=True))
    components = sorted({c for g in missing for c in owners[g]})
    return PlacementError(
        f"cluster.component_placement: {request.describe(missing)} cannot be reserved: "
        f"another job holds {them} on node rank {request.node_rank} (Ray node {node[:8]}); "
        f"Ray could give GPUs {offer} there. Free {them}, or place {', '.join(components)} "
        "on GPUs that are free"
    )


def _where(name: str, plan: GroupPlacement, rank: int) -> tuple[int, int, int, str]:
    index = plan.worker_gpus[rank]
    node_rank, gpu = divmod(index, plan.gpus_per_node)
    return (
        index,
        node_rank,
        gpu,
        f"{name} worker {rank} (planned on GPU {index}: GPU {gpu} of node rank {node_rank})",
    )


def check_device_reports(
    reports: Sequence[PlacedReport], node_ids: dict[int, str] | None = None
) -> None:
    """Every worker runs where its GPU index says: its GPU, on its node rank's node.

    A worker that reserves a GPU must report exactly the GPU ``index % gpus_per_node``;
    every worker (also those that reserve no GPU) must run on the node of its node rank;
    the workers of one node rank share a node and different node ranks use different nodes.

    Args:
        reports: The started workers and what each reported.
        node_ids: The Ray node id of each node rank, when known (the reserved bundles').

    Raises:
        PlacementError: Names the group, the rank, the planned index and what Ray gave.
    """
    nodes = dict(node_ids or {})
    for name, plan, rank, report in reports:
        if not plan.on_gpus:
            continue
        index, node_rank, gpu, where = _where(name, plan, rank)
        expected = nodes.setdefault(node_rank, report.node_id)
        if report.node_id != expected:
            raise PlacementError(
                f"{where} runs on Ray node {report.node_id[:8]}, but node rank {node_rank} "
                f"is node {expected[:8]}"
            )
        if plan.num_gpus_per_worker and report.gpu_ids != (gpu,):
            raise PlacementError(
                f"{where} reserved {plan.num_gpus_per_worker:g} GPU but Ray gave it GPU ids "
                f"{list(report.gpu_ids)}; the run stops instead of computing on another GPU"
            )
    shared: dict[str, list[int]] = defaultdict(list)
    for node_rank, node in sorted(nodes.items()):
        shared[node].append(node_rank)
    for node, ranks in shared.items():
        if len(ranks) > 1:
            raise PlacementError(
                f"node ranks {', '.join(map(str, ranks))} of the placement run on one Ray "
                f"node ({node[:8]}); each node rank needs a node of its own"
            )
