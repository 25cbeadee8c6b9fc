"""Reasoning-path algorithms against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from rl_core.algorithms import (
    aggregate_loss,
    consecutive_groups,
    discounted_token_returns,
    get_advantage,
    informative_groups,
    kl_penalty,
    overlong_penalty,
)


def pairs(n):
    """Group index of ``n`` rows in groups of two consecutive rows."""
    return consecutive_groups(n // 2, 2)


def test_rloo_leave_one_out_baseline():
    adv, ret = get_advantage("rloo")(
        rewards=torch.tensor([1.0, 0, 0, 1, 2, 2]), group_size=2, group_index=pairs(6)
    )
    # groups [1,0] [0,1] [2,2]: A_i = r_i - r_other
    torch.testing.assert_close(adv, torch.tensor([1.0, -1, -1, 1, 0, 0]))
    adv, _ = get_advantage("rloo")(
        rewards=torch.tensor([1.0, 0, 0, 1]), group_size=4, group_index=[0] * 4
    )
    # r=1: others mean 1/3 -> 2/3; r=0: others mean 2/3 -> -2/3
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))
    torch.testing.assert_close(ret, torch.tensor([1.0, -1, -1, 1, 0, 0]))


def test_rloo_group_of_one_is_zero_and_shapes_checked():
    adv, _ = get_advantage("rloo")(
        rewards=torch.tensor([3.0, -1.0]), group_size=1, group_index=[0, 1]
    )
    assert torch.equal(adv, torch.zeros(2))
    with pytest.raises(ValueError, match="divisible by group_size"):
        get_advantage("rloo")(
            rewards=torch.tensor([1.0, 2, 3]), group_size=2, group_index=[0, 0, 1]
        )


def test_dr_grpo_is_mean_centred_without_std():
    adv, _ = get_advantage("dr_grpo")(
        rewards=torch.tensor([1.0, 0, 0, 1]), group_size=4, group_index=[3] * 4
    )
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5, -0.5, 0.5]))


def test_discounted_token_returns():
    g = discounted_token_returns(
        torch.tensor([[0.0, 0, 1, 7]]), torch.tensor([[1.0, 1, 1, 0]]), gamma=0.5
    )
    torch.testing.assert_close(g, torch.tensor([[0.25, 0.5, 1.0, 0.0]]))


def test_reinforce_plus_plus_whitens_returns_over_batch_tokens():
    token_rewards = torch.tensor([[0.0, 0, 1], [0, -1, 5]])
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0]])
    adv, ret = get_advantage("reinforce_plus_plus")(
        token_rewards=token_rewards, response_mask=mask, gamma=1.0
    )
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1, 1], [-1, -1, 0]]))
    # valid returns 1,1,1,-1,-1: mean 0.2, unbiased std sqrt(1.2)
    std = math.sqrt(1.2)
    expected = torch.tensor([[0.8, 0.8, 0.8], [-1.2, -1.2, 0.0]]) / std
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=1e-6)


def test_reinforce_plus_plus_baseline():
    mask = torch.tensor([[1.0, 1], [1, 0], [1, 1], [1, 1]])
    adv, ret = get_advantage("reinforce_plus_plus_baseline")(
        rewards=torch.tensor([1.0, 0, 1, 1]), response_mask=mask, group_size=2, group_index=pairs(4)
    )
    torch.testing.assert_close(ret, torch.tensor([[0.5, 0.5], [-0.5, 0], [0, 0], [0, 0]]))
    valid = np.array([0.5, 0.5, -0.5, 0, 0, 0, 0])
    mean, std = valid.mean(), valid.std(ddof=1)
    expected = np.array([[0.5, 0.5], [-0.5, mean], [0, 0], [0, 0]]) - mean
    expected = expected / std * mask.numpy()
    torch.testing.assert_close(adv, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


def test_token_gae_stops_at_the_last_response_token():
    kw = {
        "token_rewards": torch.tensor([[0.0, 1.0, 0.0]]),
        "values": torch.tensor([[0.5, 0.8, 9.0]]),  # the padded value must not leak
        "response_mask": torch.tensor([[1.0, 1.0, 0.0]]),
    }
    adv, ret = get_advantage("token_gae")(**kw, gamma=1.0, gae_lambda=1.0)
    # delta1 = 1 - 0.8 = 0.2 (terminal); delta0 = 0.8 - 0.5 = 0.3; A0 = 0.3 + 0.2
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.2, 0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 0.0]]))
    adv, _ = get_advantage("token_gae")(**kw, gamma=0.9, gae_lambda=0.5)
    # delta0 = 0.9 * 0.8 - 0.5 = 0.22; A0 = 0.22 + 0.9 * 0.5 * 0.2 = 0.31
    torch.testing.assert_close(adv, torch.tensor([[0.31, 0.2, 0.0]]))


def test_token_gae_needs_values():
    with pytest.raises(ValueError, match="value head"):
        get_advantage("token_gae")(
            token_rewards=torch.zeros(1, 2),
            values=None,
            response_mask=torch.ones(1, 2),
            gamma=1.0,
            gae_lambda=1.0,
        )


@pytest.mark.parametrize(
    ("mode", "norm", "expected"),
    [
        ("token-mean", None, 7 / 3),
        ("seq-mean-token-sum", None, 3.5),
        ("seq-mean-token-mean", None, 2.75),
        # mean over the 2 sequences of (token sum / norm): (3/3 + 4/3) / 2, (3/7 + 4/7) / 2
        ("seq-mean-token-sum-norm", None, 7 / 6),
        ("seq-mean-token-sum-norm", 7.0, 0.5),
    ],
)
def test_loss_aggregation_modes(mode, norm, expected):
    loss = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert aggregate_loss(loss, mask, mode, norm=norm).item() == pytest.approx(expected)


def test_unknown_aggregation_lists_modes():
    with pytest.raises(ValueError, match="allowed: seq-mean-token-mean"):
        aggregate_loss(torch.ones(1, 1), torch.ones(1, 1), "sum")


@pytest.mark.parametrize("base", ["k1", "k2", "k3", "low_var_kl"])
def test_straight_through_kl_has_base_value_and_k2_gradient(base):
    ref = torch.tensor([-1.0, -0.5, -2.0])
    logp = torch.tensor([-0.7, -0.9, -1.2], requires_grad=True)
    value = kl_penalty(logp, ref, f"{base}+")
    torch.testing.assert_close(value.detach(), kl_penalty(logp.detach(), ref, base))
    value.sum().backward()
    torch.testing.assert_close(logp.grad, (logp - ref).detach())


def test_informative_groups_drops_constant_reward_groups():
    keep = informative_groups(torch.tensor([1.0, 1, 0, 1, 0, 0]), pairs(6), group_size=2)
    assert keep.tolist() == [False, False, True, True, False, False]
    # groups of any size when no group_size is asked for; rows anywhere in the batch
    keep = informative_groups(torch.tensor([1.0, 0, 1, 1, 2]), [5, 9, 5, 5, 9])
    assert keep.tolist() == [False, True, False, False, True]


def test_overlong_penalty_matches_dapo_eq13():
    pen = overlong_penalty(torch.tensor([5, 6, 8, 10, 11]), max_length=10, buffer_length=4)
    torch.testing.assert_close(pen, torch.tensor([0.0, 0.0, -0.5, -1.0, -1.0]))
    half = overlong_penalty(torch.tensor([8]), max_length=10, buffer_length=4, penalty_factor=0.5)
    torch.testing.assert_close(half, torch.tensor([-0.25]))
    with pytest.raises(ValueError, match="buffer_length"):
        overlong_penalty(torch.tensor([1]), max_length=4, buffer_length=5)
