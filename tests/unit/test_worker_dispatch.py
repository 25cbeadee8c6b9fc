"""Declared splits and reductions of worker methods, without Ray."""

from __future__ import annotations

import numpy as np
import pytest

from infra.cluster.dispatch import (
    DEFAULT,
    UPDATE_METRICS,
    MethodSpec,
    Parts,
    PerRank,
    Reduce,
    Split,
    method_spec,
    plan_call,
    public_methods,
    reduce_results,
    row_parts,
    take_rows,
    worker_method,
)
from infra.cluster.worker_base import step_method


class _Base:
    @worker_method(split=Split.REPLICA_ROWS, reduce=UPDATE_METRICS)
    @step_method
    def update(self, shard: dict, iteration: int) -> dict:
        return {}

    @step_method
    @worker_method(split=Split.RANK_ZERO, reduce=Reduce.FIRST)
    def address(self) -> str:
        return ""

    def plain(self) -> None:
        pass

    def _private(self) -> None:
        pass


class _Child(_Base):
    def update(self, shard: dict, iteration: int) -> dict:  # no decorator: inherits it
        return super().update(shard, iteration)


def test_a_declaration_is_found_through_step_method_and_subclass_overrides() -> None:
    assert method_spec(_Base, "update") == MethodSpec(Split.REPLICA_ROWS, UPDATE_METRICS)
    assert method_spec(_Child, "update") == MethodSpec(Split.REPLICA_ROWS, UPDATE_METRICS)
    assert method_spec(_Child, "address") == MethodSpec(Split.RANK_ZERO, Reduce.FIRST)
    assert method_spec(_Child, "plain") == MethodSpec()
    assert public_methods(_Child) == ["address", "plain", "update"]


@pytest.mark.parametrize("count", [0, 1, 5, 7, 8, 13])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_row_parts_are_those_of_numpy_array_split(count: int, parts: int) -> None:
    expected = np.array_split(np.arange(count), parts)
    got = row_parts(count, parts)
    assert len(got) == parts
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_take_rows_indexes_dicts_arrays_and_lists() -> None:
    rows = np.array([2, 0])
    data = {"a": np.arange(4), "b": np.arange(8).reshape(4, 2)}
    out = take_rows(data, rows)
    np.testing.assert_array_equal(out["a"], [2, 0])
    np.testing.assert_array_equal(out["b"], [[4, 5], [0, 1]])
    np.testing.assert_array_equal(take_rows(np.arange(4) * 10, rows), [20, 0])
    assert take_rows(["x", "y", "z"], rows) == ["z", "x"]


def test_one_to_all_sends_the_same_arguments_and_per_rank_ones() -> None:
    plan = plan_call(MethodSpec(), 3, 1, (1, PerRank(["a", "b", "c"])), {"k": PerRank([7, 8, 9])})
    assert plan.ranks == [0, 1, 2]
    assert plan.args == [(1, "a"), (1, "b"), (1, "c")]
    assert plan.kwargs == [{"k": 7}, {"k": 8}, {"k": 9}]
    assert plan.keep == [0, 1, 2]
    with pytest.raises(ValueError, match="PerRank argument has 2 items for 3 ranks"):
        plan_call(MethodSpec(), 3, 1, (PerRank([1, 2]),), {})


def test_rank_zero_calls_rank_zero_only() -> None:
    plan = plan_call(MethodSpec(Split.RANK_ZERO), 4, 1, ("x",), {})
    assert (plan.ranks, plan.args, plan.keep) == ([0], [("x",)], [0])


def test_rows_split_contiguously_and_skip_ranks_without_rows() -> None:
    prompts = [[i] for i in range(5)]
    plan = plan_call(MethodSpec(Split.ROWS), 3, 1, (prompts, "s", PerRank([10, 11, 12])), {})
    assert plan.ranks == [0, 1, 2]
    assert plan.args == [([[0], [1]], "s", 10), ([[2], [3]], "s", 11), ([[4]], "s", 12)]
    few = plan_call(MethodSpec(Split.ROWS), 4, 1, (["a", "b"], PerRank([0, 1, 2, 3])), {})
    assert few.ranks == [0, 1]
    assert few.args == [(["a"], 0), (["b"], 1)]


def test_rows_split_several_row_arguments() -> None:
    spec = MethodSpec(Split.ROWS, row_args=2)
    plan = plan_call(spec, 2, 1, (["p0", "p1", "p2"], ["r0", "r1", "r2"], 5), {})
    assert plan.args == [(["p0", "p1"], ["r0", "r1"], 5), (["p2"], ["r2"], 5)]


def test_replica_rows_give_tensor_parallel_peers_the_same_part_and_keep_one_answer() -> None:
    data = {"x": np.arange(6)}
    plan = plan_call(MethodSpec(Split.REPLICA_ROWS), 4, 2, (data, 3), {})
    assert plan.ranks == [0, 1, 2, 3]
    parts = [a[0]["x"].tolist() for a in plan.args]
    assert parts == [[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5]]
    assert [a[1] for a in plan.args] == [3, 3, 3, 3]
    assert plan.keep == [0, 2]
    empty = plan_call(MethodSpec(Split.REPLICA_ROWS), 3, 1, ({"x": np.arange(1)},), {})
    assert empty.ranks == [0, 1, 2]  # collective ranks are all called, even without rows


def test_parts_replace_the_contiguous_split() -> None:
    plan = plan_call(MethodSpec(Split.REPLICA_ROWS), 2, 1, (Parts(["A", "B"]), 1), {})
    assert plan.args == [("A", 1), ("B", 1)]
    with pytest.raises(ValueError, match="got 3 parts of rows for 2"):
        plan_call(MethodSpec(Split.REPLICA_ROWS), 2, 1, (Parts([1, 2, 3]),), {})


def test_update_metrics_sum_shares_average_the_learning_rate_and_drop_seconds() -> None:
    ranks = [
        {"train/loss": 0.1, "train/lr": 3e-4, "seconds": 2.0},
        {"train/loss": 0.2, "train/lr": 3e-4, "seconds": 5.0},
        {"train/loss": 0.7, "train/lr": 3e-4, "seconds": 1.0},
    ]
    out = reduce_results(UPDATE_METRICS, ranks)
    assert list(out) == ["train/loss", "train/lr"]
    assert out["train/loss"] == float(sum(r["train/loss"] for r in ranks))  # same order
    assert out["train/lr"] == 3e-4


@pytest.mark.parametrize("replicas", [1, 2, 4, 8])
def test_the_mean_learning_rate_is_what_pre_divided_shares_summed_to(replicas: int) -> None:
    for lr in (1e-6, 3e-4, 0.1, 1.7e-5, 5e-3 / 3):
        pre_divided = float(sum(lr / replicas for _ in range(replicas)))
        assert reduce_results(UPDATE_METRICS, [{"train/lr": lr}] * replicas)["train/lr"] == (
            pre_divided
        )


def test_reductions_of_whole_results_and_keys() -> None:
    assert reduce_results(None, [1, 2]) == [1, 2]
    assert reduce_results(Reduce.SUM, [1, 2]) == 3.0
    assert reduce_results(Reduce.MEAN, [1, 2]) == 1.5
    assert reduce_results(Reduce.MAX, [1, 3, 2]) == 3
    assert reduce_results(Reduce.FIRST, ["a", "b"]) == "a"
    assert reduce_results(Reduce.CONCAT, [[1], [2, 3]]) == [1, 2, 3]
    arrays = reduce_results(
        {DEFAULT: Reduce.CONCAT, "seconds": Reduce.MAX},
        [
            {"lp": np.array([1.0]), "seconds": 1.0},
            {"lp": np.array([2.0, 3.0]), "seconds": 4.0},
        ],
    )
    np.testing.assert_array_equal(arrays["lp"], [1.0, 2.0, 3.0])
    assert arrays["seconds"] == 4.0
    assert reduce_results({"a": Reduce.SUM}, [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]) == {
        "a": 3.0,
        "b": "x",  # keys not named: the first rank's
    }
