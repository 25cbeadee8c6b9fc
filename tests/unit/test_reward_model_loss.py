"""The Bradley-Terry loss of reward models, checked against hand computations, and one
optimizer step of it (micro-batches add up to the whole batch)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from rl_core.models.base_policy import BasePolicy
from rl_core.training.reward_update import (
    bradley_terry_loss,
    pairwise_accuracy,
    reward_margin,
    reward_model_update,
    score_pairs,
)


def test_bradley_terry_loss_by_hand() -> None:
    chosen = torch.tensor([2.0, 0.0, -1.0])
    rejected = torch.tensor([1.0, 0.0, 1.0])
    # margins 1, 0, -2: -log sigmoid(m) = log(1 + exp(-m))
    expected = (math.log(1 + math.exp(-1)) + math.log(2) + math.log(1 + math.exp(2))) / 3
    assert float(bradley_terry_loss(chosen, rejected)) == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx((0.3132617 + 0.6931472 + 2.1269280) / 3, abs=1e-6)


def test_loss_is_log_two_at_zero_margin_and_vanishes_for_large_margins() -> None:
    zeros = torch.zeros(4)
    assert float(bradley_terry_loss(zeros, zeros)) == pytest.approx(math.log(2))
    assert float(bradley_terry_loss(zeros + 50, zeros)) == pytest.approx(0.0, abs=1e-12)


def test_loss_gradient_by_hand() -> None:
    chosen = torch.tensor([0.5, -0.5], requires_grad=True)
    rejected = torch.tensor([0.0, 0.0])
    bradley_terry_loss(chosen, rejected).backward()
    # d/dm of -log sigmoid(m) is -(1 - sigmoid(m)) = -sigmoid(-m); halved by the mean
    expected = [-1 / (1 + math.exp(0.5)) / 2, -1 / (1 + math.exp(-0.5)) / 2]
    assert chosen.grad.tolist() == pytest.approx(expected, abs=1e-6)


def test_pairwise_accuracy_and_margin() -> None:
    chosen = torch.tensor([1.0, 2.0, 0.0, 3.0])
    rejected = torch.tensor([0.0, 3.0, 0.0, 1.0])
    assert pairwise_accuracy(chosen, rejected) == 0.5  # a tie is not a win
    assert reward_margin(chosen, rejected) == pytest.approx((1 - 1 + 0 + 2) / 4)
    assert pairwise_accuracy(torch.zeros(0), torch.zeros(0)) == 0.0


class SumOfTokens(BasePolicy):
    """A toy reward model: a learned weight per token id, summed over the unmasked tokens."""

    forward_types = ("default_forward",)

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 10))

    def default_forward(self, forward_inputs: dict[str, torch.Tensor], **kw: Any) -> dict:
        ids, mask = forward_inputs["input_ids"], forward_inputs["attention_mask"]
        return {"rewards": (self.weight[ids] * mask).sum(dim=1)}

    def predict_action_batch(self, env_obs: Any, mode: str = "eval", **kw: Any) -> Any:
        raise NotImplementedError


def _pairs() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[1, 2, 0], [3, 4, 5], [6, 0, 0], [7, 8, 9]])
    mask = (ids > 0).long()
    other = torch.tensor([[2, 1, 3], [9, 0, 0], [5, 5, 0], [1, 0, 0]])
    return {
        "chosen_ids": ids,
        "chosen_mask": mask,
        "rejected_ids": other,
        "rejected_mask": (other > 0).long(),
    }


def _step(micro: int) -> tuple[dict[str, float], torch.Tensor]:
    policy = SumOfTokens()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    metrics = reward_model_update(policy, optimizer, _pairs(), 4, micro, None)
    return metrics, policy.weight.detach().clone()


def test_update_loss_is_the_batch_mean_and_micro_batches_add_up() -> None:
    pairs = _pairs()
    before = SumOfTokens()
    chosen, rejected = score_pairs(before, pairs, parts=1)
    expected = float(bradley_terry_loss(chosen, rejected))
    whole, weights = _step(micro=4)
    split, weights_split = _step(micro=1)
    assert whole["train/rm_loss"] == pytest.approx(expected, abs=1e-6)
    assert split["train/rm_loss"] == pytest.approx(expected, abs=1e-6)
    assert whole["train/pairwise_accuracy"] == pairwise_accuracy(chosen, rejected)
    assert whole["train/reward_margin"] == pytest.approx(reward_margin(chosen, rejected))
    torch.testing.assert_close(weights, weights_split)
    assert not torch.equal(weights, before.weight.detach())
    assert whole["train/skipped_updates"] == 0.0


def test_scoring_in_parts_equals_one_pass() -> None:
    policy = SumOfTokens()
    one = score_pairs(policy, _pairs(), parts=1)
    three = score_pairs(policy, _pairs(), parts=3)
    for a, b in zip(one, three, strict=True):
        torch.testing.assert_close(a, b)
