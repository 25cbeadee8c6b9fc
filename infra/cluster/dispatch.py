"""How a call of a worker method is split across a group's ranks and its results combined.

A worker class declares it per method with :func:`worker_method` (verl's dispatch modes):

.. code-block:: python

    class Trainer(WorkerBase):
        @worker_method(split=Split.REPLICA_ROWS, reduce=UPDATE_METRICS)
        def update(self, shard, totals, iteration): ...

A :class:`~infra.cluster.worker_group.WorkerGroup` of such workers then exposes the method as
an attribute (``group.update(arrays, totals, iteration, within=("update", 600.0))``); a
method without a declaration goes to every rank with the same arguments and returns the
list of rank results. Nothing here needs Ray.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

_Method = TypeVar("_Method", bound=Callable[..., Any])
#: Attribute a declared method carries its :class:`MethodSpec` in.
SPEC_ATTRIBUTE = "__worker_method__"


class Split(enum.Enum):
    """Which ranks a call goes to, and with which arguments.

    Attributes:
        ONE_TO_ALL: Every rank, the same arguments.
        ROWS: The leading ``row_args`` arguments hold rows; rank ``r`` gets the ``r``-th of
            ``len(group)`` contiguous parts (:func:`row_parts`). A rank whose part is empty
            is not called (independent workers: rollout engines, scorers).
        REPLICA_ROWS: The same with one part per data-parallel replica of the group's
            layout; every rank is called (collective trainer ranks), tensor-parallel peers
            with their replica's part, and one result per replica is kept.
        RANK_ZERO: Rank 0 only.
    """

    ONE_TO_ALL = "one_to_all"
    ROWS = "rows"
    REPLICA_ROWS = "replica_rows"
    RANK_ZERO = "rank_zero"


class Reduce(enum.Enum):
    """How the results of the ranks called become one value.

    Attributes:
        SUM: ``float(sum(values))``, in rank order (shares that add up).
        MEAN: ``float(sum(values) / len(values))``.
        MAX: The largest value.
        FIRST: The first rank's value.
        CONCAT: Lists chained, numpy arrays concatenated, in rank order.
        DROP: Left out of the combined dict.
    """

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    FIRST = "first"
    CONCAT = "concat"
    DROP = "drop"


#: Key of a reduction mapping that applies to every key it does not name.
DEFAULT = "*"
#: A reduction: one for the whole result, one per key of dict results (with
#: :data:`DEFAULT`; keys it leaves out: :attr:`Reduce.FIRST`), or None for the list of rank
#: results.
Reduction = Reduce | Mapping[str, Reduce] | None

#: Metrics of a data-parallel update: each rank reports its share of the loss terms (they
#: add up over ranks) and the learning rate it used; its ``seconds`` are left out.
UPDATE_METRICS: Mapping[str, Reduce] = {
    DEFAULT: Reduce.SUM,
    "train/lr": Reduce.MEAN,
    "seconds": Reduce.DROP,
}


@dataclass(frozen=True)
class PerRank:
    """An argument that differs per rank: rank ``r`` receives ``items[r]``.

    Attributes:
        items: One item per rank of the group.
    """

    items: Sequence[Any]


@dataclass(frozen=True)
class Parts:
    """Rows already split by the caller (e.g. balanced by tokens).

    They replace the contiguous parts of a ``ROWS`` or ``REPLICA_ROWS`` split.

    Attributes:
        items: One part per rank (``ROWS``) or per replica (``REPLICA_ROWS``).
    """

    items: Sequence[Any]


@dataclass(frozen=True)
class MethodSpec:
    """A worker method's split and reduction.

    Attributes:
        split: Which ranks are called, with which arguments.
        reduce: How their results are combined.
        row_args: Leading positional arguments split by rows (``ROWS``, ``REPLICA_ROWS``).
    """

    split: Split = Split.ONE_TO_ALL
    reduce: Reduction = None
    row_args: int = 1

    def __post_init__(self) -> None:
        if self.row_args < 1:
            raise ValueError(f"row_args must be at least 1, got {self.row_args}")


@dataclass(frozen=True)
class CallPlan:
    """The ranks a call goes to and the arguments of each.

    Attributes:
        ranks: The ranks called, ascending.
        args: Positional arguments per rank called.
        kwargs: Keyword arguments per rank called.
        keep: Positions (in ``ranks``) of the results that are combined.
    """

    ranks: list[int]
    args: list[tuple[Any, ...]]
    kwargs: list[dict[str, Any]]
    keep: list[int] = field(default_factory=list)


def worker_method(
    split: Split = Split.ONE_TO_ALL, reduce: Reduction = None, row_args: int = 1
) -> Callable[[_Method], _Method]:
    """Declare how a worker method's calls are split and its results reduced.

    The method itself is returned unchanged (it composes with ``step_method`` in either
    order); a subclass that overrides it keeps the declaration.

    Args:
        split: Which ranks are called, with which arguments (:class:`Split`).
        reduce: How the rank results become one value (:data:`Reduction`).
        row_args: Leading positional arguments holding rows (for the row splits).
    """
    spec = MethodSpec(split, reduce, row_args)

    def declare(method: _Method) -> _Method:
        setattr(method, SPEC_ATTRIBUTE, spec)
        return method

    return declare


def public_methods(cls: type) -> list[str]:
    """The methods of worker class ``cls`` a group may call, sorted."""
    return sorted(
        name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name, None))
    )


def method_spec(cls: type, name: str) -> MethodSpec:
    """The declared split and reduction of ``cls.name`` (the defaults when undeclared).

    The nearest class in the method resolution order that declares it wins, so an
    override without the decorator keeps its base class's declaration.
    """
    for klass in cls.__mro__:
        spec = getattr(klass.__dict__.get(name), SPEC_ATTRIBUTE, None)
        if spec is not None:
            return spec
    return MethodSpec()


def row_parts(count: int, parts: int) -> list[np.ndarray]:
    """Indices of ``count`` rows in ``parts`` contiguous parts (``numpy.array_split``).

    The parts differ in size by at most one, the larger first; trailing parts are empty
    when there are fewer rows than parts.
    """
    return np.array_split(np.arange(count), parts)


def take_rows(data: Any, rows: Sequence[int] | np.ndarray) -> Any:
    """The ``rows`` of ``data``: a dict of arrays (each indexed), an array, or a sequence."""
    if isinstance(data, Mapping):
        return {k: v[rows] for k, v in data.items()}
    if isinstance(data, np.ndarray):
        return data[rows]
    return [data[i] for i in rows]


def _count(data: Any) -> int:
    if isinstance(data, Mapping):
        return len(next(iter(data.values())))
    return len(data)


def _row_shards(spec: MethodSpec, args: tuple[Any, ...], parts: int) -> list[list[Any]]:
    """Per part, the split row arguments (a :class:`Parts` argument is taken as it is)."""
    if len(args) < spec.row_args:
        raise TypeError(f"a row split needs {spec.row_args} row argument(s), got {len(args)}")
    shards: list[list[Any]] = [[] for _ in range(parts)]
    for data in args[: spec.row_args]:
        if isinstance(data, Parts):
            if len(data.items) != parts:
                raise ValueError(f"got {len(data.items)} parts of rows for {parts}")
            each = list(data.items)
        else:
            each = [take_rows(data, rows) for rows in row_parts(_count(data), parts)]
        for part, shard in enumerate(each):
            shards[part].append(shard)
    return shards


def _is_empty(shard: list[Any]) -> bool:
    return _count(shard[0]) == 0


def plan_call(
    spec: MethodSpec,
    size: int,
    tensor_parallel: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> CallPlan:
    """Split a call of a method declared ``spec`` across a group of ``size`` ranks.

    Args:
        spec: The method's declaration.
        size: Ranks of the group.
        tensor_parallel: Ranks per data-parallel replica (``REPLICA_ROWS``).
        args: The call's positional arguments (:class:`PerRank` and :class:`Parts` allowed).
        kwargs: Its keyword arguments (:class:`PerRank` allowed).

    Raises:
        ValueError: A :class:`PerRank` argument does not have one item per rank, or a
            :class:`Parts` argument one part per rank or replica.
    """
    if spec.split is Split.RANK_ZERO:
        ranks, shards = [0], None
    elif spec.split is Split.ONE_TO_ALL:
        ranks, shards = list(range(size)), None
    elif spec.split is Split.ROWS:
        per_rank = _row_shards(spec, args, size)
        ranks = [r for r in range(size) if not _is_empty(per_rank[r])]
        shards = per_rank
    else:
        per_replica = _row_shards(spec, args, size // tensor_parallel)
        shards = [per_replica[r // tensor_parallel] for r in range(size)]
        ranks = list(range(size))
    rest = args[spec.row_args :] if shards is not None else args
    plan = CallPlan(ranks, [], [])
    for rank in ranks:
        own = [_for_rank(a, rank, size) for a in rest]
        plan.args.append((*shards[rank], *own) if shards is not None else tuple(own))
        plan.kwargs.append({k: _for_rank(v, rank, size) for k, v in kwargs.items()})
    replicas = spec.split is Split.REPLICA_ROWS
    plan.keep.extend(i for i, r in enumerate(ranks) if not replicas or r % tensor_parallel == 0)
    return plan


def _for_rank(value: Any, rank: int, size: int) -> Any:
    if not isinstance(value, PerRank):
        return value
    if len(value.items) != size:
        raise ValueError(f"a PerRank argument has {len(value.items)} items for {size} ranks")
    return value.items[rank]


def reduce_values(how: Reduce, values: Sequence[Any]) -> Any:
    """Combine one value per rank (``values`` in rank order) as ``how`` says."""
    if how is Reduce.SUM:
        return float(sum(values))
    if how is Reduce.MEAN:
        return float(sum(values) / len(values))
    if how is Reduce.MAX:
        return max(values)
    if how is Reduce.FIRST:
        return values[0]
    if how is Reduce.CONCAT:
        if isinstance(values[0], np.ndarray):
            return np.concatenate(list(values))
        return [x for value in values for x in value]
    raise ValueError(f"{how} does not combine values")


def reduce_results(reduce: Reduction, results: list[Any]) -> Any:
    """The rank ``results`` combined by ``reduce`` (None: the list itself).

    A mapping combines dict results key by key, in the first result's key order.
    """
    if reduce is None:
        return results
    if isinstance(reduce, Reduce):
        return reduce_values(reduce, results)
    default = reduce.get(DEFAULT, Reduce.FIRST)
    out = {}
    for key in results[0]:
        how = reduce.get(key, default)
        if how is not Reduce.DROP:
            out[key] = reduce_values(how, [r[key] for r in results])
    return out
