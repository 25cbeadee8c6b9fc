"""Pure driver maths of LLM training: token rewards, the advantage step, DAPO batch fill."""

from types import SimpleNamespace

import pytest
import torch

from rl_core.algorithms.dapo import fill_with_informative_groups
from rl_core.training.llm_advantage import compute_llm_advantages, outcome_token_rewards


def algo(**kw):
    base = dict(
        adv_type="grpo",
        group_size=2,
        gamma=1.0,
        gae_lambda=1.0,
        kl_estimator="k1",
        kl_coef=0.5,
        kl_in_reward=False,
        normalize_advantages=False,
    )
    return SimpleNamespace(**{**base, **kw})


def test_scores_land_on_the_last_response_token_and_empty_rows_get_none():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    rewards = outcome_token_rewards(torch.tensor([2.0, -1.0, 5.0]), mask)
    assert rewards.tolist() == [[0, 2, 0], [0, 0, -1], [0, 0, 0]]


def test_grpo_advantages_by_hand():
    # group 0: scores 1, 0 -> mean 0.5, std (unbiased) 0.7071 -> +-0.7071
    # group 1: scores 1, 1 -> zero advantage
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    old = torch.zeros(4, 2)
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0])
    out = compute_llm_advantages(scores, mask, old, algo(), group_index=[0, 0, 1, 1])
    expected = torch.tensor([[0.7071, 0.7071], [-0.7071, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert torch.allclose(out.advantages, expected, atol=1e-3)
    assert out.metrics["train/advantage_mean"] == pytest.approx((2 * 0.7071 - 0.7071) / 7, abs=1e-3)
    assert "rollout/kl_to_ref" not in out.metrics


def test_kl_is_measured_and_subtracted_in_reward_when_asked():
    mask = torch.tensor([[1, 1], [1, 1]])
    old = torch.tensor([[0.0, -1.0], [0.0, 0.0]])
    ref = torch.tensor([[0.0, -2.0], [0.0, 0.0]])  # k1 = old - ref: [[0, 1], [0, 0]]
    scores = torch.tensor([1.0, 1.0])
    measured = compute_llm_advantages(
        scores, mask, old, algo(), ref_logprobs=ref, group_index=[0, 0]
    )
    assert measured.metrics["rollout/kl_to_ref"] == pytest.approx(0.25)
    shaped = compute_llm_advantages(
        scores, mask, old, algo(adv_type="reinforce_plus_plus", kl_in_reward=True), ref_logprobs=ref
    )
    plain = compute_llm_advantages(
        scores, mask, old, algo(adv_type="reinforce_plus_plus"), ref_logprobs=ref
    )
    # the penalty 0.5 * 1 on row 0's last token lowers its returns-to-go on both tokens
    assert torch.allclose(plain.returns - shaped.returns, torch.tensor([[0.5, 0.5], [0, 0]]))


def rounds_of(*score_rows):
    return [list(r) for r in score_rows]


def test_dynamic_fill_keeps_informative_groups_in_order_and_tops_up():
    rounds = rounds_of([1, 1, 0, 1], [0, 0, 1, 0])  # groups of 2: round 0 keeps g1, round 1 g1
    picks, n = fill_with_informative_groups(
        lambda i: ("r", i),
        lambda batch: rounds[batch[1]],
        lambda batch: [0, 0, 1, 1],
        2,
        target=6,
        dynamic=True,
        max_rounds=2,
    )
    assert n == 2
    # kept: r0 rows 2-3, r1 rows 2-3; then topped up from the first set-aside group (r0 0-1)
    assert picks == [(("r", 0), [2, 3]), (("r", 1), [2, 3]), (("r", 0), [0, 1])]


def test_dynamic_fill_stops_when_enough_and_trims():
    rounds = rounds_of([1, 0, 0, 1])
    picks, n = fill_with_informative_groups(
        lambda i: i,
        lambda i: rounds[i],
        lambda i: [0, 0, 1, 1],
        2,
        target=2,
        dynamic=True,
        max_rounds=5,
    )
    assert (picks, n) == ([(0, [0, 1])], 1)


def test_without_dynamic_sampling_one_round_is_taken_whole():
    picks, n = fill_with_informative_groups(
        lambda i: f"round{i}",
        lambda b: [1, 1],
        lambda b: [0, 0],
        2,
        target=4,
        dynamic=False,
        max_rounds=3,
    )
    assert (picks, n) == ([("round0", [0, 1, 2, 3])], 1)
