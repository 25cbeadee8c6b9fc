"""Rewards of agent trajectories: unscored rows (infrastructure failures) stay out of group
statistics and training, tool-call costs, and the per-iteration agent metrics."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kinds.reasoning.agent_rollout import trajectory_rows
from kinds.reasoning.responses import ResponseBatch
from kinds.reasoning.reward_step import collect_rewards
from rl_core.agents.lockstep import run_lockstep
from rl_core.agents.loops import Generation, LoopSettings, get_agent_loop
from rl_core.agents.metrics import reward_by_tool_use, trajectory_metrics
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.tools import TOOLS
from rl_core.algorithms import get_advantage
from rl_core.training.llm_advantage import compute_llm_advantages, unscored_loss_mask

GROUP_ESTIMATORS = ["grpo", "dr_grpo", "rloo", "reinforce_plus_plus_baseline"]


def estimate(name: str, scores: list[float], groups: list[int], size: int):
    """``(advantages, returns)`` per row, rows with NaN scores unmarked (as in training)."""
    rewards = torch.tensor(scores)
    mask = torch.isfinite(rewards)[:, None].float().expand(len(scores), 3)
    adv, ret = get_advantage(name)(
        rewards=rewards,
        group_size=size,
        group_index=torch.tensor(groups),
        response_mask=mask,
        token_rewards=torch.zeros(len(scores), 3),
    )
    return (adv, ret) if adv.dim() == 1 else (adv[:, 0], ret[:, 0])


def advantages(name: str, scores: list[float], groups: list[int], size: int) -> torch.Tensor:
    return estimate(name, scores, groups, size)[0]


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
def test_unscored_rows_are_out_of_the_group_statistics(name):
    nan = float("nan")
    scores = [1.0, 0.0, nan, 1.0, 0.5, 0.5, 2.0, 0.0]
    with_gap, returns = estimate(name, scores, [0] * 4 + [1] * 4, 4)
    assert torch.isfinite(with_gap).all() and with_gap[2] == 0
    if name == "reinforce_plus_plus_baseline":  # centred on the scored rows' mean
        torch.testing.assert_close(returns[:4], torch.tensor([1 / 3, -2 / 3, 0.0, 1 / 3]))
    else:  # the scored rows get what their group without the unscored row would give
        torch.testing.assert_close(
            with_gap[[0, 1, 3]], advantages(name, [1.0, 0.0, 1.0], [0] * 3, 3)
        )
        torch.testing.assert_close(with_gap[4:], advantages(name, scores[4:], [0] * 4, 4))
    # scoring the row 0 instead would move its group's baseline: never a silent zero
    zero = advantages(name, [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 2.0, 0.0], [0] * 4 + [1] * 4, 4)
    assert not torch.allclose(zero[[0, 1, 3]], with_gap[[0, 1, 3]])


def test_a_group_with_one_scored_row_gets_zero_advantages():
    nan = float("nan")
    for name in ("grpo", "rloo"):
        adv = advantages(name, [nan, 3.0, nan], [0, 0, 0], 3)
        assert adv.tolist() == [0.0, 0.0, 0.0]


def test_llm_advantages_give_unscored_rows_nothing():
    algo = SimpleNamespace(
        kl_estimator="k1",
        kl_in_reward=False,
        kl_coef=0.0,
        adv_type="grpo",
        group_size=2,
        gamma=1.0,
        gae_lambda=1.0,
        normalize_advantages=True,
    )
    scores = torch.tensor([1.0, float("nan"), 0.0, 1.0])
    mask = torch.ones(4, 3)
    old = torch.zeros(4, 3)
    ref = torch.full((4, 3), -0.5)
    out = compute_llm_advantages(
        scores, mask, old, algo, ref_logprobs=ref, group_index=[0, 0, 1, 1]
    )
    assert out.advantages[1].abs().sum() == 0 and torch.isfinite(out.advantages).all()
    assert out.advantages[[2, 3]].abs().sum() > 0
    assert unscored_loss_mask(scores, mask)[1].sum() == 0
    assert unscored_loss_mask(scores, mask)[[0, 2, 3]].sum() == 9


def summary(calls: int = 0, infra: bool = False, spans=((0, 4, 1),)) -> dict:
    return {
        "turn_spans": [list(s) for s in spans],
        "num_turns": sum(s[2] for s in spans),
        "num_tool_calls": calls,
        "masked_fraction": 0.0,
        "infra_failed": infra,
        "finish_reason": "infra_failure" if infra else "eos",
        "tool_calls": [
            {
                "name": "python",
                "outcome": "infra_failure" if infra else "ok",
                "latency_s": 0.5,
                "detail": "",
                "turn": 0,
                "attempts": 1,
            }
        ]
        * calls,
    }


def batch_of(summaries: list[dict]) -> ResponseBatch:
    n = len(summaries)
    return ResponseBatch(
        response_ids=[[1, 2, 3]] * n,
        finished=[True] * n,
        group_index=[i // 2 for i in range(n)],
        trajectories=summaries,
    )


ALGO = SimpleNamespace(overlong_buffer_length=0)


def test_collect_rewards_marks_infra_failures_and_nan_rewards_unscored_and_charges_calls():
    batch = batch_of([summary(1), summary(0), summary(1, infra=True), summary(2)])
    metrics = collect_rewards(batch, [[1.0, 1.0], [1.0, float("nan")]], ALGO, 8, call_cost=0.1)
    assert np.isnan(batch.scores[2]) and np.isnan(batch.scores[3])
    np.testing.assert_allclose(batch.scores[:2], [0.9, 1.0])
    assert metrics["rollout/reward_mean"] == 1.0
    assert metrics["rollout/unscored_fraction"] == 0.5
    # the scored rows' reward before the call cost: one with a call, one without
    assert metrics["agent/reward_with_tool"] == metrics["agent/reward_without_tool"] == 1.0


def test_reward_with_and_without_tool_calls_overall_and_per_kind():
    summaries = [summary(1), summary(0), summary(2), summary(0), summary(1)]
    scores = [1.0, 0.0, 0.5, 1.0, float("nan")]  # the last is unscored: left out
    m = reward_by_tool_use(scores, summaries, ["add", "add", "mul", "mul", "mul"])
    assert m == {
        "agent/reward_with_tool": 0.75,
        "agent/reward_without_tool": 0.5,
        "agent/add/reward_with_tool": 1.0,
        "agent/add/reward_without_tool": 0.0,
        "agent/mul/reward_with_tool": 0.5,
        "agent/mul/reward_without_tool": 1.0,
    }
    only_calls = reward_by_tool_use([1.0], [summary(1)], [None], prefix="eval/agent/")
    assert only_calls == {"eval/agent/reward_with_tool": 1.0}  # no row without: no figure
    with pytest.raises(ValueError, match="one of each per row"):
        reward_by_tool_use([1.0, 0.0], [summary(1)], [None])


def test_a_batch_nobody_could_score_fails_the_step():
    batch = batch_of([summary(1, infra=True), summary(1, infra=True)])
    with pytest.raises(RuntimeError, match="none of the 2 responses could be scored"):
        collect_rewards(batch, [[0.0, 0.0]], ALGO, 8)


def test_a_timed_out_tool_call_is_an_infra_failure_out_of_its_group():
    """End to end on the driver's side: loop → trajectory → reward → GRPO advantages."""

    def sandbox_never_started(arguments: str) -> ToolResult:
        return ToolResult(Outcome.INFRA_FAILURE, "sandbox timed out", detail="wall")

    def generate(requests, round_index):
        out = []
        for r in requests:
            asks = bytes(r.context_ids).decode().startswith("ask") and round_index == 0
            text = "<call>slow: 1</call>" if asks else "#### 1"
            out.append(
                Generation(list(text.encode()), [0.0] * len(text), 1, "stop" if asks else "eos")
            )
        return out

    TOOLS.register("slow", sandbox_never_started, force=True)
    try:
        trajectories = run_lockstep(
            get_agent_loop("tool_loop"),
            [list(b"ask"), list(b"no"), list(b"no"), list(b"no")],
            LoopSettings(tools=("slow",), tool_retries=1),
            generate,
            lambda t: list(t.encode()),
            lambda ids: bytes(ids).decode(),
        )
    finally:
        TOOLS.unregister("slow")
    rows = trajectory_rows(trajectories)
    first = rows["trajectories"][0]
    assert first["infra_failed"] and first["tool_calls"][0]["attempts"] == 2
    assert first["tool_calls"][0]["detail"] == "wall"
    batch = batch_of(rows["trajectories"])
    collect_rewards(batch, [[0.0, 1.0, 0.0, 1.0]], ALGO, 8)
    assert np.isnan(batch.scores[0])
    adv = advantages("grpo", batch.scores.tolist(), batch.group_index, 2)
    assert adv[0] == 0 and adv[1] == 0  # a group of one scored row: nothing to compare
    metrics = trajectory_metrics(rows["trajectories"])
    assert metrics["agent/infra_failure_rate"] == 0.25
    assert metrics["agent/tool_timeout_rate"] == 1.0


def test_trajectory_metrics():
    summaries = [
        summary(0),
        summary(2, spans=((0, 4, 1), (4, 10, 0), (10, 12, 1))),
        summary(1, infra=True),
    ]
    summaries[1]["tool_calls"][1] = {**summaries[1]["tool_calls"][1], "outcome": "model_failure"}
    m = trajectory_metrics(summaries)
    assert m["agent/tool_calls_mean"] == 1.0
    assert m["agent/tool_call_rate"] == pytest.approx(2 / 3)
    assert m["agent/tool_error_rate"] == pytest.approx(1 / 3)
    assert m["agent/infra_failure_rate"] == pytest.approx(1 / 3)
    assert m["agent/masked_token_fraction"] == pytest.approx(6 / 20)
    assert m["agent/turns_mean"] == pytest.approx(4 / 3)
    assert trajectory_metrics([]) == {}
