import pytest
import torch

from rl_core.algorithms import KL_ESTIMATORS, kl_penalty

LOGP = torch.tensor([-1.0, -2.0])
REF = torch.tensor([-1.5, -1.0])
# logp - ref = [0.5, -1.0];  x = ref - logp = [-0.5, 1.0]


def test_k1():
    torch.testing.assert_close(kl_penalty(LOGP, REF, "k1"), torch.tensor([0.5, -1.0]))


def test_k2():
    # 0.5 * [0.5^2, 1.0^2] = [0.125, 0.5]
    torch.testing.assert_close(kl_penalty(LOGP, REF, "k2"), torch.tensor([0.125, 0.5]))


@pytest.mark.parametrize("name", ["k3", "low_var_kl", "K3"])
def test_k3_and_low_var_kl(name):
    # exp(x) - x - 1: [e^-0.5 + 0.5 - 1, e^1 - 1 - 1] = [0.6065307 - 0.5, 2.7182818 - 2]
    expected = torch.tensor([0.10653066, 0.71828183])
    torch.testing.assert_close(kl_penalty(LOGP, REF, name), expected)


def test_low_var_kl_is_clamped():
    logp = torch.tensor([0.0, 0.0])
    ref = torch.tensor([20.0, -50.0])
    # k3: e^20 - 21 ~ 4.85e8 and e^-50 + 50 - 1 ~ 49; low_var_kl clamps both to 10
    torch.testing.assert_close(kl_penalty(logp, ref, "low_var_kl"), torch.tensor([10.0, 10.0]))
    assert kl_penalty(logp, ref, "k3")[0].item() > 1e8


def test_k3_is_zero_at_equal_policies_and_differentiable():
    logp = torch.tensor([-0.7, -3.0], requires_grad=True)
    kl = kl_penalty(logp, logp.detach(), "k3")
    torch.testing.assert_close(kl, torch.zeros(2))
    kl.sum().backward()
    # d/dlogp [exp(ref - logp) - (ref - logp) - 1] = -exp(0) + 1 = 0 at logp == ref
    torch.testing.assert_close(logp.grad, torch.zeros(2))


def test_unknown_estimator_lists_allowed():
    with pytest.raises(ValueError, match=r"unknown KL estimator 'k4'; allowed: k1, k1\+, k2"):
        kl_penalty(LOGP, REF, "k4")
    base = ["k1", "k2", "k3", "low_var_kl"]
    assert KL_ESTIMATORS.names() == sorted(base + [f"{b}+" for b in base])
