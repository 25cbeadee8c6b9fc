import math

import pytest
import torch

from rl_core.algorithms import (
    POLICY_LOSSES,
    compute_ppo_policy_loss,
    compute_value_loss,
    get_policy_loss,
    masked_mean,
    register_policy_loss,
    value_loss_elements,
)
from rl_core.registry import RegistryError
from rl_core.training.llm_update import _value_loss


def _logp(ratios: list[float]) -> torch.Tensor:
    """Log-probs whose ratio to old log-probs of 0 equals ``ratios``."""
    return torch.log(torch.tensor(ratios)).requires_grad_(True)


def test_ppo_unclipped_value_and_gradient():
    logprobs = _logp([1.1, 0.9])
    adv = torch.tensor([2.0, -1.0])
    loss, metrics = compute_ppo_policy_loss(
        logprobs=logprobs,
        old_logprobs=torch.zeros(2),
        advantages=adv,
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
    )
    # ratios inside [0.8, 1.2]: losses -A*ratio = [-2*1.1, 1*0.9] = [-2.2, 0.9]; mean = -0.65
    assert loss.item() == pytest.approx(-0.65, abs=1e-6)
    # d/dlogp (-A*exp(logp))/2 = -A*ratio/2 = [-1.1, 0.45]
    loss.backward()
    torch.testing.assert_close(logprobs.grad, torch.tensor([-1.1, 0.45]))
    assert metrics["clipfrac"] == 0.0
    assert metrics["dual_clipfrac"] == 0.0
    # approx_kl = mean(old - new) = -(ln 1.1 + ln 0.9)/2 = -(0.0953102 - 0.1053605)/2
    assert metrics["approx_kl"] == pytest.approx(0.00502517, abs=1e-6)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-6)  # (1.1 + 0.9) / 2
    assert all(isinstance(v, float) for v in metrics.values())


def test_ppo_asymmetric_clip_both_sides():
    logprobs = _logp([1.5, 0.5, 1.25, 0.5])
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])
    loss, metrics = compute_ppo_policy_loss(
        logprobs=logprobs,
        old_logprobs=torch.zeros(4),
        advantages=adv,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,  # ratio clamped to [0.8, 1.28]
    )
    # a) r=1.5,  A=+1: pg1=-1.5,  pg2=-1.28 -> -1.28 (clipped high)
    # b) r=0.5,  A=-1: pg1=0.5,   pg2=0.8   ->  0.8  (clipped low)
    # c) r=1.25, A=+1: pg1=-1.25, pg2=-1.25 -> -1.25 (inside 1.28; symmetric 0.2 would clip)
    # d) r=0.5,  A=+1: pg1=-0.5,  pg2=-0.8  -> -0.5  (pessimistic max keeps unclipped)
    # mean = (-1.28 + 0.8 - 1.25 - 0.5) / 4 = -2.23 / 4 = -0.5575
    assert loss.item() == pytest.approx(-0.5575, abs=1e-6)
    assert metrics["clipfrac"] == pytest.approx(0.5)  # a and b
    # approx_kl = -(ln1.5 + ln0.5 + ln1.25 + ln0.5)/4
    #           = -(0.405465 - 0.693147 + 0.223144 - 0.693147)/4 = 0.189421
    assert metrics["approx_kl"] == pytest.approx(0.1894214, abs=1e-6)
    assert metrics["ratio_mean"] == pytest.approx(0.9375, abs=1e-6)  # (1.5+0.5+1.25+0.5)/4
    # clipped elements get no gradient; c, d: -A*ratio/4 = [-0.3125, -0.125]
    loss.backward()
    torch.testing.assert_close(logprobs.grad, torch.tensor([0.0, 0.0, -0.3125, -0.125]))


def test_ppo_loss_mask():
    loss, metrics = compute_ppo_policy_loss(
        logprobs=_logp([1.5, 0.5, 1.25, 0.5]),
        old_logprobs=torch.zeros(4),
        advantages=torch.tensor([1.0, -1.0, 1.0, 1.0]),
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_mask=torch.tensor([1, 1, 0, 1]),
    )
    # element c dropped: (-1.28 + 0.8 - 0.5) / 3 = -0.98 / 3
    assert loss.item() == pytest.approx(-0.98 / 3, abs=1e-6)
    assert metrics["clipfrac"] == pytest.approx(2 / 3)
    assert metrics["ratio_mean"] == pytest.approx(2.5 / 3, abs=1e-6)  # (1.5+0.5+0.5)/3


def test_ppo_dual_clip_negative_advantage_huge_ratio():
    logprobs = torch.tensor([3.0, 3.0], requires_grad=True)  # ratio = e^3 = 20.0855
    loss, metrics = compute_ppo_policy_loss(
        logprobs=logprobs,
        old_logprobs=torch.zeros(2),
        advantages=torch.tensor([-1.0, 1.0]),
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
        clip_ratio_c=3.0,
    )
    # A=-1: pg1 = 20.0855, pg2 = 1.2, max = 20.0855; dual: min(20.0855, -A*c = 3) = 3
    # A=+1: pg1 = -20.0855, pg2 = -1.2, max = -1.2; dual clip not applied to A > 0
    # mean = (3 - 1.2) / 2 = 0.9
    assert loss.item() == pytest.approx(0.9, abs=1e-6)
    assert metrics["dual_clipfrac"] == pytest.approx(0.5)
    assert metrics["clipfrac"] == pytest.approx(0.5)  # only the A=+1 element (pg2 > pg1)
    assert metrics["approx_kl"] == pytest.approx(-3.0)  # mean(0 - 3)
    assert metrics["ratio_mean"] == pytest.approx(math.exp(3.0), rel=1e-6)
    loss.backward()  # both elements are constants of logprobs now
    torch.testing.assert_close(logprobs.grad, torch.zeros(2))

    # Without dual clip the A=-1 element keeps 20.0855: (20.085537 - 1.2) / 2 = 9.4427685
    loss, _ = compute_ppo_policy_loss(
        logprobs=logprobs,
        old_logprobs=torch.zeros(2),
        advantages=torch.tensor([-1.0, 1.0]),
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
    )
    assert loss.item() == pytest.approx(9.4427685, abs=1e-5)


@pytest.mark.parametrize("c", [1.0, 0.5])
def test_ppo_dual_clip_constant_must_exceed_one(c):
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        compute_ppo_policy_loss(
            logprobs=torch.zeros(1),
            old_logprobs=torch.zeros(1),
            advantages=torch.ones(1),
            clip_ratio_low=0.2,
            clip_ratio_high=0.2,
            clip_ratio_c=c,
        )


def test_value_loss_clipping_both_branches():
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    old_values = torch.tensor([0.5, 1.0])
    returns = torch.tensor([3.0, 1.5])
    loss, metrics = compute_value_loss(values, old_values, returns, value_clip=0.2)
    # e0: unclipped (1-3)^2 = 4; clipped v = 0.5+0.2 = 0.7, (0.7-3)^2 = 5.29 -> 5.29 (clipped)
    # e1: unclipped (2-1.5)^2 = 0.25; clipped v = 1.0+0.2 = 1.2, (1.2-1.5)^2 = 0.09 -> 0.25
    # loss = 0.5 * (5.29 + 0.25) / 2 = 1.385
    assert loss.item() == pytest.approx(1.385, abs=1e-6)
    assert metrics["value_clipfrac"] == pytest.approx(0.5)
    # e0 clipped branch is flat in v; e1: d/dv 0.5*(v-R)^2/2 = (2-1.5)/2 = 0.25
    loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([0.0, 0.25]))


def test_value_loss_unclipped_and_masked():
    values, old, ret = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 1.0]), torch.tensor([3.0, 1.5])
    loss, metrics = compute_value_loss(values, old, ret)
    assert loss.item() == pytest.approx(1.0625)  # 0.5 * (4 + 0.25) / 2
    assert metrics == {"value_clipfrac": 0.0}
    loss, _ = compute_value_loss(values, old, ret, loss_mask=torch.tensor([False, True]))
    assert loss.item() == pytest.approx(0.125)  # 0.5 * 0.25
    with pytest.raises(ValueError, match="value_clip"):
        compute_value_loss(values, old, ret, value_clip=0.0)


def _masked_mean_value_loss_before(values, old_values, returns, value_clip, loss_mask):
    """``compute_value_loss`` as it was written before it shared ``value_loss_elements``."""
    unclipped = (values - returns) ** 2
    if value_clip is None:
        losses = unclipped
        clipfrac = 0.0
    else:
        v_clipped = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
        clipped = (v_clipped - returns) ** 2
        losses = torch.maximum(unclipped, clipped)
        clipfrac = float(masked_mean((clipped > unclipped).to(values.dtype), loss_mask).item())
    return 0.5 * masked_mean(losses, loss_mask), clipfrac


def _weighted_sum_value_loss_before(values, old, returns, weights, clip):
    """The LLM update's value loss as it was written before it shared ``value_loss_elements``."""
    losses = (values - returns) ** 2
    if clip is not None:
        clipped = old + torch.clamp(values - old, -clip, clip)
        losses = torch.maximum(losses, (clipped - returns) ** 2)
    return 0.5 * (losses * weights).sum()


def _value_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    shape = (4, 33)
    values = torch.randn(shape, generator=generator, dtype=torch.float32)
    old_values = values + 0.5 * torch.randn(shape, generator=generator, dtype=torch.float32)
    returns = torch.randn(shape, generator=generator, dtype=torch.float32)
    weights = torch.rand(shape, generator=generator, dtype=torch.float32)
    weights = weights * (torch.rand(shape, generator=generator) > 0.3)
    return values, old_values, returns, weights


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("value_clip", [None, 0.05, 0.2, 10.0])
def test_value_losses_match_their_former_formulas_exactly(seed: int, value_clip: float | None):
    values, old_values, returns, weights = _value_inputs(seed)
    for mask in (None, weights > 0, weights):
        ours = values.clone().requires_grad_(True)
        theirs = values.clone().requires_grad_(True)
        loss, metrics = compute_value_loss(ours, old_values, returns, value_clip, mask)
        expected, clipfrac = _masked_mean_value_loss_before(
            theirs, old_values, returns, value_clip, mask
        )
        assert torch.equal(loss, expected)
        assert metrics["value_clipfrac"] == clipfrac
        loss.backward()
        expected.backward()
        assert torch.equal(ours.grad, theirs.grad)

    ours = values.clone().requires_grad_(True)
    theirs = values.clone().requires_grad_(True)
    part = {"old_values": old_values, "returns": returns}
    loss = _value_loss(ours, part, weights, value_clip)
    expected = _weighted_sum_value_loss_before(theirs, old_values, returns, weights, value_clip)
    assert torch.equal(loss, expected)
    loss.backward()
    expected.backward()
    assert torch.equal(ours.grad, theirs.grad)


def test_value_loss_elements_clip_some_and_not_others():
    values, old_values, returns, _ = _value_inputs(0)
    losses, unclipped = value_loss_elements(values, old_values, returns, 0.05)
    assert 0 < int((losses > unclipped).sum()) < losses.numel()
    assert torch.equal(losses, torch.maximum(losses, unclipped))
    plain, same = value_loss_elements(values, old_values, returns)
    assert plain is same
    assert torch.equal(plain, (values - returns) ** 2)


def test_masked_mean():
    entropy = torch.tensor([1.0, 2.0, 3.0])
    assert masked_mean(entropy).item() == pytest.approx(2.0)
    assert masked_mean(entropy, torch.tensor([1, 1, 0])).item() == pytest.approx(1.5)
    # [2] mask broadcast over a [2, 2] tensor selects column 0: (1 + 3) / 2
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert masked_mean(x, torch.tensor([True, False])).item() == 2.0
    assert masked_mean(x, torch.zeros(2, 2)).item() == 0.0  # empty mask -> 0, not NaN


def test_policy_loss_registry():
    assert get_policy_loss("PPO") is compute_ppo_policy_loss
    with pytest.raises(RegistryError, match=r"unknown policy loss 'nope'; known: .*ppo"):
        get_policy_loss("nope")

    def other(**_):
        return None

    with pytest.raises(RegistryError, match="compute_ppo_policy_loss"):
        register_policy_loss("ppo", other)
    try:
        register_policy_loss("ppo", force=True)(other)
        assert get_policy_loss("ppo") is other
    finally:
        register_policy_loss("ppo", compute_ppo_policy_loss, force=True)
    assert get_policy_loss("ppo") is compute_ppo_policy_loss

    try:

        @register_policy_loss("Test_Loss")
        def my_loss(**_):
            return None

        assert get_policy_loss("test_loss") is my_loss
    finally:
        POLICY_LOSSES.unregister("test_loss")
