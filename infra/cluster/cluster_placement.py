"""A run's placement on its Ray cluster: CPUs or GPUs, the reserved bundles, the check.

:func:`place` decides what ``cluster.component_placement`` indices mean (GPUs when
``cluster.device`` is ``cuda``, or ``auto`` on a cluster that has GPUs; CPUs otherwise),
plans every worker group (:func:`infra.cluster.placement.plan_placement` or
:func:`infra.cluster.gpu_placement.plan_gpu_placement`) and, on GPUs, reserves exactly the
GPUs the indices name (:mod:`infra.cluster.gpu_reserve`: index ``i`` is GPU
``i % gpus_per_node`` of node rank ``i // gpus_per_node``, one bundle per GPU holding it and
the CPUs of the workers living with it), so collocated workers share exactly their GPU,
disaggregated ones get disjoint GPUs and the ranks of a node stay on one node. All of it
happens before any worker starts; a placement the cluster cannot host fails with
:class:`~infra.cluster.placement.PlacementError`. Once the workers run,
:meth:`ClusterPlacement.check_workers` checks each is on its planned GPU and node.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from infra.cluster.devices import DeviceReport
from infra.cluster.gpu_binding import PlacedReport, check_device_reports, node_requests
from infra.cluster.gpu_placement import Attached, GpuCluster, plan_gpu_placement
from infra.cluster.gpu_reserve import release, reserve_gpus
from infra.cluster.placement import GroupPlacement, PlacementError, format_indices, plan_placement
from infra.log_detail import DETAIL
from rl_core.config import RLPipeConfig
from rl_core.config.placement import component_specs

logger = logging.getLogger(__name__)


def placement_device(device: str, cluster_gpus: float) -> str:
    """``cuda`` or ``cpu``: what the placement's indices mean.

    Raises:
        PlacementError: ``cluster.device`` is ``cuda`` but the cluster has no GPU.
    """
    if device == "cuda" and cluster_gpus <= 0:
        raise PlacementError(
            "cluster.device = 'cuda' but the Ray cluster has no GPUs (allowed here: 'cpu' "
            "or 'auto'; a local cluster announces cluster.num_gpus_per_node GPUs)"
        )
    if device == "auto":
        return "cuda" if cluster_gpus > 0 else "cpu"
    return device


def gpu_cluster_shape(cluster_cfg: Any, nodes: list[dict[str, Any]]) -> GpuCluster:
    """The :class:`GpuCluster` a run's placement is planned for, checked against Ray's nodes.

    Args:
        cluster_cfg: The ``cluster`` config section.
        nodes: ``ray.nodes()``.

    Raises:
        PlacementError: Fewer GPU nodes, or fewer GPUs per node, than the config names.
    """
    alive = [n for n in nodes if n.get("Alive", True)]
    gpu_nodes = sorted(
        (
            (int(n["Resources"].get("GPU", 0)), float(n["Resources"].get("CPU", 0)))
            for n in alive
            if n["Resources"].get("GPU", 0) > 0
        ),
        reverse=True,
    )
    want_nodes = cluster_cfg.num_nodes
    per_node = cluster_cfg.num_gpus_per_node
    usable = gpu_nodes[:want_nodes]
    if per_node is None and usable:
        per_node = min(gpus for gpus, _ in usable)
    if len(usable) < want_nodes or per_node is None or min(g for g, _ in usable) < per_node:
        have = ", ".join(str(g) for g, _ in gpu_nodes) or "none"
        raise PlacementError(
            f"cluster.num_nodes = {want_nodes} x cluster.num_gpus_per_node = "
            f"{per_node if per_node is not None else 'auto'} needs {want_nodes} node(s) with "
            f"that many GPUs; the Ray cluster's nodes have GPUs: {have}"
        )
    return GpuCluster(want_nodes, per_node, min(cpus for _, cpus in usable))


@dataclass
class ClusterPlacement:
    """Every worker group's placement and, on GPUs, the bundles reserved for them.

    Attributes:
        device: ``cuda`` (indices are GPUs) or ``cpu``.
        groups: Placement of each group, by component name.
        cluster: The GPU cluster's shape (None for a CPU placement).
        reserved: The Ray placement groups holding the GPUs (empty for a CPU placement).
        node_ids: The Ray node id of each node rank (empty for a CPU placement).
    """

    device: str
    groups: dict[str, GroupPlacement]
    cluster: GpuCluster | None = None
    reserved: list[Any] = field(default_factory=list)
    node_ids: dict[int, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> GroupPlacement:
        return self.groups[name]

    def release(self) -> None:
        """Give the reserved bundles back to Ray (after the workers stopped)."""
        release(self.reserved)
        self.reserved = []

    def log(self, sizes: dict[str, int], cfg_device: str) -> None:
        """One line on what the indices mean, one per group."""
        if self.cluster is not None:
            logger.info(
                "placement on GPUs (cluster.device=%s): cluster.component_placement indices "
                "are GPUs of %s",
                cfg_device,
                self.cluster.describe(),
            )
        else:
            logger.info(
                "placement on CPUs (cluster.device=%s): cluster.component_placement indices "
                "are CPUs",
                cfg_device,
            )
        for name, plan in self.groups.items():
            logger.info(
                "placement %s: %d worker(s) on %s",
                name,
                sizes.get(name, 1),
                plan.mode,
                extra=DETAIL,
            )

    def check_workers(self, groups: list[Any]) -> list[DeviceReport]:
        """Log where every worker runs and check it is where the plan put it.

        Args:
            groups: Started :class:`~infra.cluster.worker_group.WorkerGroup` s.

        Raises:
            PlacementError: A worker that reserved a GPU got another than its index names,
                or a worker runs on another node than its node rank's (see
                :func:`~infra.cluster.gpu_binding.check_device_reports`).
        """
        reports: list[PlacedReport] = []
        for group in groups:
            for rank, report in enumerate(group.device_report()):
                reports.append((group.name, group.placement, rank, report))
                logger.info(
                    "device %s %d: %s (GPU ids %s on node %s, CUDA_VISIBLE_DEVICES=%s, pid %d)",
                    report.group,
                    report.rank,
                    report.device,
                    list(report.gpu_ids),
                    report.node_id[:8],
                    report.cuda_visible_devices,
                    report.pid,
                    extra=DETAIL,
                )
        if self.cluster is not None:
            check_device_reports(reports, self.node_ids)
        return [r for _, _, _, r in reports]


#: Components placed with the actor unless the config places them.
WITH_ACTOR_BY_DEFAULT = ("ref", "reward")


def _placement_with_ref(placement: dict[str, str | int], sizes: dict[str, int]) -> dict:
    """The placement with ``ref`` and ``reward`` on the actor's set unless placed elsewhere."""
    specs = component_specs(placement)
    for name in WITH_ACTOR_BY_DEFAULT:
        if name in sizes and name not in specs and "actor" in specs:
            specs[name] = specs["actor"]
    return specs


def _reserve(
    plan: dict[str, GroupPlacement], cluster: GpuCluster, timeout_s: float
) -> tuple[list[Any], dict[int, str]]:
    """Reserve the plan's GPUs exactly; fills each group's ``scheduling`` (its bundles).

    Returns:
        The placement groups held and the Ray node id of each node rank.
    """
    reservation = reserve_gpus(node_requests(plan, cluster.gpus_per_node), timeout_s)
    for name, group in plan.items():
        strategies = tuple(
            PlacementGroupSchedulingStrategy(
                reservation.slots[gpu][0], placement_group_bundle_index=reservation.slots[gpu][1]
            )
            for gpu in group.worker_gpus
        )
        plan[name] = dataclasses.replace(group, scheduling=strategies)
    return reservation.groups, reservation.node_ids


def place(
    cfg: RLPipeConfig,
    sizes: dict[str, int],
    attached: dict[str, Attached] | None = None,
    tensor_parallel: int = 1,
    free_cpus: float = 0.0,
) -> ClusterPlacement:
    """Plan (and on GPUs reserve) the placement of a run's worker groups.

    Args:
        cfg: The validated run config (its ``cluster`` and ``timeouts`` sections).
        sizes: Workers per group (``ref`` and ``reward`` are placed with the actor unless
            the config places them).
        attached: Helper groups living with another group's rank 0 (the replay buffer).
        tensor_parallel: Trainer ranks per tensor-parallel group (kept on one node).
        free_cpus: On GPUs, CPUs the workers leave free on the first node for the run's
            processes outside its groups (an online run's policy server replicas). On CPUs
            each worker reserves at most its share of its CPU set, which leaves room.

    Raises:
        PlacementError: See :func:`placement_device`, :func:`gpu_cluster_shape`,
            :func:`~infra.cluster.gpu_placement.plan_gpu_placement` and
            :func:`~infra.cluster.placement.plan_placement`.
    """
    attached = attached or {}
    resources = ray.cluster_resources()
    cluster_gpus = float(resources.get("GPU", 0))
    device = placement_device(cfg.cluster.device, cluster_gpus)
    specs = _placement_with_ref(cfg.cluster.component_placement, sizes)
    if device == "cpu":
        plan = plan_placement(specs, sizes, int(resources.get("CPU", 1)))
        for name, helper in attached.items():
            plan[name] = GroupPlacement(plan[helper.anchor].cpus, helper.num_cpus)
        if cluster_gpus:
            plan = {n: dataclasses.replace(p, hide_gpus=True) for n, p in plan.items()}
        result = ClusterPlacement("cpu", plan)
    else:
        shape = gpu_cluster_shape(cfg.cluster, ray.nodes())
        plan = plan_gpu_placement(
            specs,
            sizes,
            shape,
            cfg.cluster.gpus_per_worker,
            attached,
            tensor_parallel,
            free_cpus,
        )
        reserved, node_ids = _reserve(plan, shape, cfg.timeouts.worker_start)
        result = ClusterPlacement("cuda", plan, shape, reserved, node_ids)
    result.log({**sizes, **{n: 1 for n in attached}}, cfg.cluster.device)
    if device == "cuda":
        used = sorted({g for p in plan.values() for g in p.worker_gpus})
        logger.info("reserved GPUs %s for the run", format_indices(used), extra=DETAIL)
    return result
