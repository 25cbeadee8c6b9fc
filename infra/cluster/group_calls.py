"""Worker methods called through their group: ``group.update(...)``, ``group.update.remote(...)``.

:class:`GroupMethod` is what ``WorkerGroup.<method>`` returns: it splits a call across the
ranks as the worker class declares (:mod:`infra.cluster.dispatch`), and :class:`Handle`
waits for the results, with a step's deadline when given one, and reduces them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray

from infra.cluster.dispatch import MethodSpec, plan_call, reduce_results

if TYPE_CHECKING:
    from infra.cluster.worker_group import WorkerGroup

#: A step's deadline: the ``timeouts`` field it comes from and its seconds.
Within = tuple[str, float]


@dataclass
class Handle:
    """The calls of one worker method in flight on some ranks of a group.

    Attributes:
        group: The group called.
        name: The method.
        spec: Its split and reduction.
        ranks: The ranks called, in order.
        refs: One ObjectRef per rank called.
        keep: Positions of the results that are combined (one per replica for
            ``REPLICA_ROWS``).
    """

    group: WorkerGroup
    name: str
    spec: MethodSpec
    ranks: list[int]
    refs: list[ray.ObjectRef]
    keep: list[int]

    def get(self, within: Within | None = None) -> Any:
        """Wait for the results and reduce them as the method declares.

        Args:
            within: ``(step, timeout_s)``: wait with that step's deadline and heartbeat
                checks (:meth:`WorkerGroup.get`); None: wait as long as it takes.

        Raises:
            StepTimeout: The deadline passed or a busy worker stopped answering heartbeats
                (those that had not answered were killed).
            Exception: What a worker raised (a dead one: ``RayActorError``).
        """
        if within is None:
            values = ray.get(self.refs)
        else:
            step, timeout_s = within
            values = self.group.get(self.refs, timeout_s, step, self.ranks)
        return reduce_results(self.spec.reduce, [values[i] for i in self.keep])


class GroupMethod:
    """A worker method of every rank of a group (returned by ``WorkerGroup.<name>``).

    Args:
        group: The group.
        name: The worker method.
        spec: Its split and reduction.
    """

    def __init__(self, group: WorkerGroup, name: str, spec: MethodSpec) -> None:
        self.group = group
        self.name = name
        self.spec = spec

    def __repr__(self) -> str:
        return f"<{self.group.cls.__name__}.{self.name} of group {self.group.name!r}>"

    def remote(self, *args: Any, **kwargs: Any) -> Handle:
        """Start the call on the ranks its split names; returns without waiting."""
        group = self.group
        plan = plan_call(self.spec, len(group), group.tensor_parallel, args, kwargs)
        refs = [
            getattr(group.handles[rank], self.name).remote(*a, **kw)
            for rank, a, kw in zip(plan.ranks, plan.args, plan.kwargs, strict=True)
        ]
        return Handle(group, self.name, self.spec, plan.ranks, refs, plan.keep)

    def __call__(self, *args: Any, within: Within | None = None, **kwargs: Any) -> Any:
        """Call and wait (with the deadline ``within`` when given); the reduced result."""
        return self.remote(*args, **kwargs).get(within)
