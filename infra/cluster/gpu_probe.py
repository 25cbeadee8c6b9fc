"""Asking Ray which GPU each bundle of a placement group holds (a probe task per bundle).

Ray assigns a bundle its GPU when the placement group is reserved and says which one only
inside it: a task scheduled into the bundle that reserves its GPU sees it in
``ray.get_gpu_ids()``. The probe task takes a few milliseconds once a worker process runs
on the node (``max_calls=0`` lets Ray reuse the process: by default a GPU task's process
exits after one call); right after a cluster starts the first probe waits for that process.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from infra.cluster.gpu_binding import Probe
from infra.cluster.placement import PlacementError


@ray.remote(num_gpus=1, num_cpus=0, max_calls=0)
def _probe() -> tuple[tuple[int, ...], str]:
    """The GPU ids and node of the bundle this task runs in."""
    gpus = tuple(int(float(g)) for g in ray.get_gpu_ids())
    return gpus, ray.get_runtime_context().get_node_id()


def seconds_left(deadline: float) -> float:
    """Seconds until ``deadline`` (a ``time.monotonic()``), at least a millisecond."""
    return max(deadline - time.monotonic(), 0.001)


def probe_ref(pg: PlacementGroup, bundle: int) -> Any:
    """Start the probe of bundle ``bundle`` of ``pg``; returns its ObjectRef."""
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=bundle)
    return _probe.options(scheduling_strategy=strategy).remote()


def _late() -> PlacementError:
    return PlacementError(
        "the tasks asking Ray which GPU each reserved bundle holds did not run in time "
        "(no worker process started?); raise timeouts.worker_start"
    )


def probed(ref: Any, deadline: float) -> Probe:
    """A probe's answer.

    Raises:
        PlacementError: The probe did not answer before the deadline.
    """
    try:
        gpus, node = ray.get(ref, timeout=seconds_left(deadline))
    except ray.exceptions.GetTimeoutError:
        raise _late() from None
    return Probe(tuple(gpus), node)


def probe(groups: list[PlacementGroup], deadline: float) -> list[list[Probe]]:
    """What every bundle of ``groups`` holds, bundle by bundle.

    The groups are probed at once, the bundles of a group one after the other: one after
    the other, they reuse one worker process per node instead of starting one per bundle.

    Raises:
        PlacementError: The probes did not answer before the deadline.
    """
    seen: list[list[Probe]] = [[] for _ in groups]
    pending = {probe_ref(pg, 0): position for position, pg in enumerate(groups)}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=seconds_left(deadline))
        if not ready:
            raise _late()
        position = pending.pop(ready[0])
        seen[position].append(probed(ready[0], deadline))
        if len(seen[position]) < groups[position].bundle_count:
            pending[probe_ref(groups[position], len(seen[position]))] = position
    return seen
