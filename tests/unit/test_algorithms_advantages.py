import math

import pytest
import torch

from rl_core.algorithms import (
    ADVANTAGES,
    compute_gae,
    compute_group_advantages,
    get_advantage,
    normalize_advantages,
    register_advantage,
)
from rl_core.registry import RegistryError

GAMMA, LAMBDA = 0.9, 0.8  # gamma * lambda = 0.72


def _gae_case() -> dict[str, torch.Tensor]:
    # Columns are envs. env 0 terminates at t=1; env 1 is truncated at t=0.
    return dict(
        rewards=torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, -1.0]]),
        values=torch.tensor([[0.5, 0.2], [1.0, 0.4], [1.5, 0.6]]),
        terminated=torch.tensor([[False, False], [True, False], [False, False]]),
        truncated=torch.tensor([[False, True], [False, False], [False, False]]),
        next_values=torch.tensor([2.0, 0.5]),
        # Only final_values[0, 1] is read (the truncated step); 99s must be ignored.
        final_values=torch.tensor([[99.0, 1.0], [99.0, 99.0], [99.0, 99.0]]),
    )


def test_gae_terminated_truncated_and_last_step_hand_computed():
    adv, ret = compute_gae(**_gae_case(), gamma=GAMMA, gae_lambda=LAMBDA)
    # env 0:
    #   t=2 last step, bootstrap next_values=2.0: d = 3 + 0.9*2.0 - 1.5 = 3.3
    #       A = 3.3
    #   t=1 terminated (no bootstrap, no carry):  d = 2 - 1.0 = 1.0
    #       A = 1.0
    #   t=0 normal, V(s1)=1.0:                    d = 1 + 0.9*1.0 - 0.5 = 1.4
    #       A = 1.4 + 0.72*1.0 = 2.12
    # env 1:
    #   t=2 last step, next_values=0.5:           d = -1 + 0.9*0.5 - 0.6 = -1.15
    #       A = -1.15
    #   t=1 normal, V(s2)=0.6:                    d = 1 + 0.9*0.6 - 0.4 = 1.14
    #       A = 1.14 + 0.72*(-1.15) = 1.14 - 0.828 = 0.312
    #   t=0 truncated, final_values=1.0, no carry: d = 0 + 0.9*1.0 - 0.2 = 0.7
    #       A = 0.7
    expected_adv = torch.tensor([[2.12, 0.7], [1.0, 0.312], [3.3, -1.15]])
    # returns = A + V
    expected_ret = torch.tensor([[2.62, 0.9], [2.0, 0.712], [4.8, -0.55]])
    torch.testing.assert_close(adv, expected_adv)
    torch.testing.assert_close(ret, expected_ret)


def test_gae_terminated_wins_over_truncated_and_ignores_bootstraps():
    # Both flags set: treated as terminal. A = r - V = 1.0 - 0.25 = 0.75 (no 10.0 bootstrap).
    adv, ret = compute_gae(
        rewards=torch.tensor([[1.0]]),
        values=torch.tensor([[0.25]]),
        terminated=torch.tensor([[1.0]]),
        truncated=torch.tensor([[1.0]]),
        next_values=torch.tensor([10.0]),
        final_values=torch.tensor([[10.0]]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    torch.testing.assert_close(adv, torch.tensor([[0.75]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0]]))


def test_gae_lambda_one_no_dones_is_discounted_return_minus_value():
    # gamma=0.5, lambda=1, r=[1,1], V=[0,0], V(s_T)=4:
    # R_1 = 1 + 0.5*4 = 3;  R_0 = 1 + 0.5*3 = 2.5
    zeros = torch.zeros(2, 1)
    adv, ret = compute_gae(
        rewards=torch.ones(2, 1),
        values=zeros,
        terminated=zeros.bool(),
        truncated=zeros.bool(),
        next_values=torch.tensor([4.0]),
        gamma=0.5,
        gae_lambda=1.0,
        unused_keyword="ignored",
    )
    torch.testing.assert_close(ret, torch.tensor([[2.5], [3.0]]))
    torch.testing.assert_close(adv, ret)


def test_gae_does_not_track_gradients():
    case = _gae_case()
    case["values"].requires_grad_(True)
    adv, ret = compute_gae(**case, gamma=GAMMA, gae_lambda=LAMBDA)
    assert not adv.requires_grad and not ret.requires_grad


def test_gae_requires_final_values_when_truncated_and_checks_shapes():
    case = _gae_case()
    del case["final_values"]
    with pytest.raises(ValueError, match="final_values"):
        compute_gae(**case, gamma=GAMMA, gae_lambda=LAMBDA)
    case = _gae_case()
    case["next_values"] = torch.zeros(3)
    with pytest.raises(ValueError, match="next_values"):
        compute_gae(**case, gamma=GAMMA, gae_lambda=LAMBDA)


GROUPS_OF_3 = [0, 0, 0, 1, 1, 1]


def test_group_advantages_with_std():
    rewards = torch.tensor([1.0, 2.0, 3.0, 0.0, 0.0, 4.0])
    adv, ret = compute_group_advantages(rewards=rewards, group_size=3, group_index=GROUPS_OF_3)
    # group [1,2,3]: mean 2, unbiased std = sqrt((1+0+1)/2) = 1 -> [-1, 0, 1]
    # group [0,0,4]: mean 4/3, unbiased var = (16/9+16/9+64/9)/2 = 16/3, std = 4/sqrt(3)
    #   -> [-4/3, -4/3, 8/3] / (4/sqrt(3)) = [-1/sqrt(3), -1/sqrt(3), 2/sqrt(3)]
    expected = torch.tensor([-1.0, 0.0, 1.0, -0.57735027, -0.57735027, 1.15470054])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=0)  # eps=1e-6 in the divisor
    torch.testing.assert_close(ret, adv)


def test_group_advantages_without_std_is_dr_grpo():
    rewards = torch.tensor([1.0, 2.0, 3.0, 0.0, 0.0, 4.0])
    adv, _ = compute_group_advantages(
        rewards=rewards, group_size=3, group_index=GROUPS_OF_3, norm_std=False
    )
    # r - group mean: [1-2, 2-2, 3-2, 0-4/3, 0-4/3, 4-4/3]
    expected = torch.tensor([-1.0, 0.0, 1.0, -4 / 3, -4 / 3, 8 / 3])
    torch.testing.assert_close(adv, expected)


def test_group_advantages_degenerate_groups_are_zero():
    adv, _ = compute_group_advantages(
        rewards=torch.tensor([3.0, -2.0]), group_size=1, group_index=[0, 1]
    )
    torch.testing.assert_close(adv, torch.zeros(2))
    # identical scores: (5-5) / (0 + eps) = 0, no NaN
    adv, _ = compute_group_advantages(
        rewards=torch.tensor([5, 5]), group_size=2, group_index=[7, 7]
    )
    torch.testing.assert_close(adv, torch.zeros(2))


def test_group_advantages_group_size_mismatch():
    with pytest.raises(ValueError, match=r"\(5\) is not divisible by group_size \(2\)"):
        compute_group_advantages(rewards=torch.zeros(5), group_size=2, group_index=[0] * 5)
    with pytest.raises(ValueError, match="1-D"):
        compute_group_advantages(rewards=torch.zeros(2, 2), group_size=2, group_index=[0, 0])


def test_normalize_advantages_masked():
    adv = torch.tensor([1.0, 3.0, 100.0])
    mask = torch.tensor([True, True, False])
    out = normalize_advantages(adv, mask, eps=0.0)
    # valid [1, 3]: mean 2, unbiased std = sqrt((1+1)/1) = sqrt(2); masked entry -> 0
    s = math.sqrt(2.0)
    torch.testing.assert_close(out, torch.tensor([-1 / s, 1 / s, 0.0]))
    out = normalize_advantages(torch.tensor([1.0, 3.0]), eps=0.0)
    torch.testing.assert_close(out, torch.tensor([-1 / s, 1 / s]))


def test_registry_builtins_case_insensitive():
    assert get_advantage("GAE") is compute_gae
    assert get_advantage(" grpo ") is compute_group_advantages
    assert "Gae" in ADVANTAGES


def test_registry_duplicate_names_existing_function():
    def other(**_):
        return None

    with pytest.raises(RegistryError, match=r"compute_gae.*force=True"):
        register_advantage("gae", other)
    with pytest.raises(RegistryError, match="compute_gae"):
        register_advantage("GAE")(other)


def test_registry_force_replaces_then_restore():
    def other(**_):
        return None

    try:
        assert register_advantage("gae", other, force=True) is other
        assert get_advantage("gae") is other
    finally:
        register_advantage("gae", compute_gae, force=True)
    assert get_advantage("gae") is compute_gae


def test_registry_decorator_and_call_forms():
    try:

        @register_advantage("test_decorated")
        def decorated(**_):
            return None

        def called(**_):
            return None

        assert register_advantage("Test_Called", called) is called
        assert get_advantage("TEST_DECORATED") is decorated
        assert get_advantage("test_called") is called
    finally:
        ADVANTAGES.unregister("test_decorated")
        ADVANTAGES.unregister("test_called")


def test_registry_unknown_lists_known():
    with pytest.raises(RegistryError, match=r"unknown advantage estimator 'nope'.*gae, grpo"):
        get_advantage("nope")
