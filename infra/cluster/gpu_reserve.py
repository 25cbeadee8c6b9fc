"""Reserving exactly the GPUs a placement names: Ray placement groups, probes, fillers.

For each node rank, one ``STRICT_PACK`` placement group with a ``{"GPU": 1, "CPU": c}``
bundle per GPU index the workers live with; different node ranks go to different nodes
(a node-id label selector). Ray gives bundles the node's free GPUs lowest ids first, not
the planned ones, so a tiny task in every bundle reports the GPU it holds
(:mod:`infra.cluster.gpu_probe`):

* the bundles hold exactly the node's planned GPUs (the usual case: a placement from GPU 0
  on an idle node): each index goes to the bundle holding its GPU;
* otherwise (the placement skips GPUs, or another job holds low ones) that node's group is
  given back and the planned GPUs are taken one by one: single-GPU "filler" placement
  groups on that node absorb its free GPUs, lowest first, until every planned GPU is held;
  then the planned ones are given back and re-reserved one by one with their CPUs, each
  taking the lowest free GPU, which is the planned one since the fillers hold the others
  (checked by a probe); the fillers are given back. A planned GPU that no filler gets (another job holds it) is
  refused with :class:`~infra.cluster.placement.PlacementError`.

All of it happens before any worker starts; whatever fails releases what it reserved.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import ray
from ray.util.placement_group import (
    NODE_ID_LABEL_KEY,
    PlacementGroup,
    placement_group,
    placement_group_table,
    remove_placement_group,
)

from infra.cluster.gpu_binding import NodeRequest, Probe, bind, unobtainable
from infra.cluster.gpu_probe import probe, probe_ref, probed, seconds_left
from infra.cluster.placement import PlacementError, format_indices
from infra.log_detail import DETAIL

logger = logging.getLogger(__name__)

#: Seconds to wait for one more GPU of a node while taking exact GPUs before deciding the
#: node has none free (Ray's scheduler sees GPUs just given back about a second later).
EXACT_WAIT_S = 5.0
#: Times the planned GPUs are given back and re-reserved before giving up (each time a
#: job taking GPUs on the node at the same moment may get one first).
EXACT_TRIES = 3


@dataclass
class Reservation:
    """The placement groups holding a placement's GPUs.

    Attributes:
        groups: Every placement group held (give them back with :func:`release`).
        slots: ``{placement index: (placement group, bundle index)}``.
        node_ids: The Ray node id of each node rank.
    """

    groups: list[PlacementGroup] = field(default_factory=list)
    slots: dict[int, tuple[PlacementGroup, int]] = field(default_factory=dict)
    node_ids: dict[int, str] = field(default_factory=dict)


def release(groups: list[PlacementGroup]) -> None:
    """Give placement groups back to Ray (a cluster already gone is fine)."""
    for pg in groups:
        try:
            remove_placement_group(pg)
        except Exception:  # noqa: BLE001 - the cluster is gone already
            pass


def _node_group(request: NodeRequest, avoid: list[str]) -> PlacementGroup:
    bundles = [{"GPU": 1.0, "CPU": cpus} for cpus in request.cpus]
    selector = [{NODE_ID_LABEL_KEY: f"!in({','.join(avoid)})"}] * len(bundles) if avoid else None
    return placement_group(
        bundles,
        strategy="STRICT_PACK",
        name=f"rlpipe-node{request.node_rank}",
        bundle_label_selector=selector,
    )


def reserve_nodes(
    requests: list[NodeRequest], deadline: float, held: list[PlacementGroup], timeout_s: float
) -> list[str]:
    """One placement group per node rank, each on a node of its own; returns their nodes.

    Raises:
        PlacementError: The cluster could not host them before the deadline.
    """
    nodes: list[str] = []
    for request in requests:
        pg = _node_group(request, nodes)
        held.append(pg)
        if not pg.wait(seconds_left(deadline)):
            need = {r.node_rank: len(r.gpus) for r in requests}
            raise PlacementError(
                f"the Ray cluster could not reserve the placement's GPUs within "
                f"{timeout_s:.0f}s (GPUs per node rank, each rank on a node of its own: "
                f"{need}); free now: {ray.available_resources()}"
            )
        nodes.append(placement_group_table(pg)["bundles_to_node_id"][0])
    return nodes


def _one_gpu(node: str, cpus: float, deadline: float) -> tuple[PlacementGroup, int]:
    """A one-bundle placement group on ``node`` and the GPU it holds (-1: none in time).

    It waits :data:`EXACT_WAIT_S` at most (and not past the deadline) for a free GPU.
    """
    bundle = {"GPU": 1.0, "CPU": cpus} if cpus else {"GPU": 1.0}
    pg = placement_group(
        [bundle],
        strategy="STRICT_PACK",
        bundle_label_selector=[{NODE_ID_LABEL_KEY: node}],
    )
    try:
        if not pg.wait(min(EXACT_WAIT_S, seconds_left(deadline))):
            return pg, -1
        seen = probed(probe_ref(pg, 0), deadline)
    except BaseException:
        release([pg])
        raise
    return pg, seen.gpu_ids[0]


def _absorb(
    request: NodeRequest, node: str, fillers: dict[int, PlacementGroup], deadline: float
) -> None:
    """Take the node's free GPUs one by one until every wanted one is held.

    Raises:
        PlacementError: The node has no more free GPU and a wanted one is still missing.
    """
    while missing := sorted(set(request.gpus) - set(fillers)):
        pg, gpu = _one_gpu(node, 0.0, deadline)
        if gpu < 0 or gpu in fillers:
            release([pg])
            raise unobtainable(request, missing, sorted(fillers), node)
        fillers[gpu] = pg


def _swap(
    request: NodeRequest, node: str, fillers: dict[int, PlacementGroup], deadline: float
) -> tuple[dict[int, PlacementGroup], dict[int, int]]:
    """Give the wanted GPUs' fillers back and re-reserve them with their CPUs, lowest first.

    Returns:
        The new groups by the GPU they hold, and ``{wanted: other GPU given}`` when Ray gave
        other GPUs (a race with another job; the caller tries again).
    """
    release([fillers.pop(gpu) for gpu in request.gpus])
    taken: dict[int, PlacementGroup] = {}
    wrong: dict[int, int] = {}
    for gpu, cpus in zip(request.gpus, request.cpus, strict=True):
        pg, got = _one_gpu(node, cpus, deadline)
        taken[got] = pg
        if got != gpu:
            wrong[gpu] = got
            break
    return taken, wrong


def take_exact(request: NodeRequest, node: str, deadline: float) -> dict[int, PlacementGroup]:
    """One placement group per wanted GPU of ``request``, each holding exactly that GPU.

    Args:
        request: The node rank's wanted GPUs.
        node: The Ray node id (the node rank's first reservation landed there).
        deadline: ``time.monotonic()`` to give up by.

    Raises:
        PlacementError: A wanted GPU is held by another job, or Ray kept giving others.
    """
    fillers: dict[int, PlacementGroup] = {}
    wrong: dict[int, int] = {}
    try:
        for _ in range(EXACT_TRIES):
            _absorb(request, node, fillers, deadline)
            taken, wrong = _swap(request, node, fillers, deadline)
            if not wrong:
                return taken
            release(list(taken.values()))
        gave = ", ".join(
            f"for GPU {request.index(g)}: {request.index(got) if got >= 0 else 'none'}"
            for g, got in wrong.items()
        )
        raise PlacementError(
            f"cluster.component_placement: Ray kept giving node rank {request.node_rank} "
            f"other GPUs than {request.describe(request.gpus)} ({gave}) after "
            f"{EXACT_TRIES} tries: another job takes GPUs on that node at the same time; "
            "start the run again when it is done"
        )
    finally:
        release(list(fillers.values()))


def reserve_gpus(requests: list[NodeRequest], timeout_s: float) -> Reservation:
    """Reserve exactly the GPUs of ``requests`` (see the module's docstring).

    Args:
        requests: What each node rank reserves (:func:`~infra.cluster.gpu_binding.node_requests`).
        timeout_s: Seconds to wait for the cluster to host the reservation.

    Raises:
        PlacementError: The cluster cannot host it, or a planned GPU is held by another job;
            nothing stays reserved.
    """
    deadline = time.monotonic() + timeout_s
    result = Reservation()
    try:
        nodes = reserve_nodes(requests, deadline, result.groups, timeout_s)
        firsts = list(result.groups)
        start = time.monotonic()
        probes = probe(firsts, deadline)
        logger.info(
            "placement probe: %d bundle(s) asked for their GPU in %.3f s",
            sum(len(p) for p in probes),
            time.monotonic() - start,
            extra=DETAIL,
        )
        for request, pg, node, seen in zip(requests, firsts, nodes, probes, strict=True):
            result.node_ids[request.node_rank] = node
            binding = bind(request, seen, request.cpus)
            if binding is None:
                _retake(request, pg, node, seen, result, deadline)
                continue
            for gpu, bundle in binding.items():
                result.slots[request.index(gpu)] = (pg, bundle)
        return result
    except BaseException:
        release(result.groups)
        raise


def _retake(
    request: NodeRequest,
    first: PlacementGroup,
    node: str,
    seen: list[Probe],
    result: Reservation,
    deadline: float,
) -> None:
    """Replace a node rank's first reservation, which holds other GPUs, by the planned ones."""
    start = time.monotonic()
    result.groups.remove(first)
    release([first])
    exact = take_exact(request, node, deadline)
    result.groups.extend(exact.values())
    for gpu, pg in exact.items():
        result.slots[request.index(gpu)] = (pg, 0)
    given = [g for p in seen for g in p.gpu_ids]
    logger.info(
        "placement node rank %d: Ray gave GPUs %s for %s; took those exactly in %.3f s",
        request.node_rank,
        format_indices([request.index(g) for g in given]),
        format_indices([request.index(g) for g in request.gpus]),
        time.monotonic() - start,
        extra=DETAIL,
    )
