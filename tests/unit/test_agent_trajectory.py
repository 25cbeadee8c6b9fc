"""The token-level trajectory: loss mask, versions, context prefixes, per-turn split, budgets."""

from __future__ import annotations

import pytest

from rl_core.agents.outcomes import Outcome
from rl_core.agents.trajectory import (
    MODEL,
    NO_VERSION,
    TOOL,
    Budget,
    ToolCallRecord,
    Trajectory,
    Turn,
    budget_stop,
    new_token_allowance,
    split_per_turn,
    tokens_left,
)


def _three_turns() -> Trajectory:
    """prompt [1, 2]; model [10, 11] v5; tool [90, 91, 92]; model [12] v6; tool [93]; model [13, 14] v6."""
    traj = Trajectory(prompt_ids=[1, 2])
    traj.add_model_tokens([10, 11], [-0.1, -0.2], version=5, finish_reason="stop")
    traj.add_tool_tokens([90, 91, 92])
    traj.add_model_tokens([12], [-0.3], version=6, finish_reason="stop")
    traj.add_tool_tokens([93])
    traj.add_model_tokens([13, 14], [-0.4, -0.5], version=6, finish_reason="eos")
    return traj


def test_tool_tokens_are_masked_and_have_no_version() -> None:
    traj = _three_turns()
    assert traj.response_ids == [10, 11, 90, 91, 92, 12, 93, 13, 14]
    assert traj.loss_mask == [1, 1, 0, 0, 0, 1, 0, 1, 1]
    assert traj.logprobs == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3, 0.0, -0.4, -0.5]
    assert traj.versions == [5, 5, NO_VERSION, NO_VERSION, NO_VERSION, 6, NO_VERSION, 6, 6]
    assert [(t.role, t.start, t.end) for t in traj.turns] == [
        (MODEL, 0, 2),
        (TOOL, 2, 5),
        (MODEL, 5, 6),
        (TOOL, 6, 7),
        (MODEL, 7, 9),
    ]
    assert traj.turns[-1] == Turn(MODEL, 7, 9, "eos")
    assert traj.num_turns == 3 and traj.num_tokens == 11
    assert traj.masked_fraction == pytest.approx(4 / 9)


def test_context_grows_by_appending_only() -> None:
    traj = Trajectory(prompt_ids=[7, 8, 9])
    contexts = [traj.context_ids()]
    for k in range(4):
        traj.add_model_tokens([100 + k] * (k + 1), [-1.0] * (k + 1), version=k)
        contexts.append(traj.context_ids())
        traj.add_tool_tokens([200 + k] * 2)
        contexts.append(traj.context_ids())
    for before, after in zip(contexts, contexts[1:], strict=False):
        assert after[: len(before)] == before and len(after) > len(before)
    assert contexts[-1] == traj.prompt_ids + traj.response_ids
    traj.context_ids().append(0)  # a copy: the caller cannot corrupt the record
    assert traj.context_ids() == contexts[-1]


def test_a_model_turn_needs_a_logprob_per_token() -> None:
    with pytest.raises(ValueError, match="2 tokens, 1 log-probabilities"):
        Trajectory(prompt_ids=[1]).add_model_tokens([1, 2], [-0.5], version=0)


def test_infra_failed_and_counts() -> None:
    traj = _three_turns()
    assert not traj.infra_failed and traj.num_tool_calls == 0
    traj.record_tool_call(ToolCallRecord("calculator", "1+1", Outcome.OK, 0.01, "", 0))
    traj.record_tool_call(ToolCallRecord("python", "x", Outcome.MODEL_FAILURE, 0.1, "", 2))
    assert not traj.infra_failed
    traj.record_tool_call(ToolCallRecord("python", "y", Outcome.INFRA_FAILURE, 0.3, "crash", 4, 3))
    assert traj.infra_failed and traj.num_tool_calls == 3
    assert Trajectory(prompt_ids=[1]).masked_fraction == 0.0


def test_to_row_is_plain_and_consistent() -> None:
    traj = _three_turns()
    traj.record_tool_call(ToolCallRecord("calculator", "1+1", Outcome.OK, 0.01, "", 0))
    traj.finish_reason = "eos"
    row = traj.to_row()
    n = len(row["response_ids"])
    assert n == len(row["loss_mask"]) == len(row["logprobs"]) == len(row["versions"]) == 9
    spans = row["turn_spans"]
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # contiguous
    for start, end, is_model in spans:
        assert set(row["loss_mask"][start:end]) <= {is_model}
    assert row["num_turns"] == 3 and row["num_tool_calls"] == 1 and not row["infra_failed"]
    assert row["tool_calls"][0]["outcome"] == "ok" and row["finish_reason"] == "eos"
    row["response_ids"].append(0)
    assert len(traj.response_ids) == 9  # copies


def test_split_per_turn_makes_one_sample_per_model_turn() -> None:
    traj = _three_turns()
    traj.finish_reason = "eos"
    samples = split_per_turn(traj)
    assert [s.prompt_ids for s in samples] == [
        [1, 2],
        [1, 2, 10, 11, 90, 91, 92],
        [1, 2, 10, 11, 90, 91, 92, 12, 93],
    ]
    assert [s.response_ids for s in samples] == [[10, 11], [12], [13, 14]]
    assert [s.versions for s in samples] == [[5, 5], [6], [6, 6]]
    assert [s.logprobs for s in samples] == [[-0.1, -0.2], [-0.3], [-0.4, -0.5]]
    for sample in samples:
        assert sample.loss_mask == [1] * len(sample.response_ids)
        assert sample.num_turns == 1 and sample.finish_reason == "eos"
        # each sample's full sequence is a prefix of the episode's
        full = traj.context_ids()
        assert sample.context_ids() == full[: len(sample.context_ids())]


def test_split_per_turn_skips_empty_model_turns() -> None:
    traj = Trajectory(prompt_ids=[1])
    traj.add_model_tokens([], [], version=0)
    traj.add_tool_tokens([5])
    traj.add_model_tokens([6], [-1.0], version=1)
    assert [s.response_ids for s in split_per_turn(traj)] == [[6]]


def test_budgets() -> None:
    budget = Budget(max_turns=2, max_total_tokens=10, max_new_tokens=4)
    traj = Trajectory(prompt_ids=[1, 2, 3])
    assert budget_stop(traj, budget) is None
    assert (tokens_left(traj, budget), new_token_allowance(traj, budget)) == (7, 4)
    traj.add_model_tokens([4, 5, 6, 7], [0.0] * 4, version=0)
    traj.add_tool_tokens([8, 9])
    assert budget_stop(traj, budget) is None
    assert (tokens_left(traj, budget), new_token_allowance(traj, budget)) == (1, 1)
    traj.add_model_tokens([10], [0.0], version=0)
    assert budget_stop(traj, budget) == "max_turns"
    full = Trajectory(prompt_ids=list(range(10)))
    assert budget_stop(full, budget) == "max_tokens" and new_token_allowance(full, budget) == 0
    over = Trajectory(prompt_ids=list(range(12)))
    assert tokens_left(over, budget) == 0


@pytest.mark.parametrize("field", ["max_turns", "max_total_tokens", "max_new_tokens"])
def test_budget_rejects_non_positive_limits(field: str) -> None:
    with pytest.raises(ValueError, match=f"Budget.{field} must be at least 1, got 0"):
        Budget(**{field: 0})
