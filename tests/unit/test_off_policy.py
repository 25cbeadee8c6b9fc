"""Importance-sampling corrections (TIS/MIS, token and sequence level) and decoupled PPO on
hand-computed values, and their wiring into the LLM update and the config."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.algorithms import compute_decoupled_ppo_loss, importance_weights
from rl_core.config import ConfigError, load_config
from rl_core.training.llm_update import llm_update, minibatch_totals
from tests.llm_batches import llm_actor, llm_algorithm, random_llm_batch

LOG = math.log


def rows(*probs):
    return torch.tensor([[LOG(p) for p in row] for row in probs])


# row 0: ratios 2.0 and 0.5 (product 1.0); row 1: 2.0 and 2.0 (product 4.0)
TARGET = rows([0.5, 0.2], [0.4, 0.4])
BEHAVIOUR = rows([0.25, 0.4], [0.2, 0.2])
MASK = torch.ones(2, 2)


@pytest.mark.parametrize(
    ("correction", "level", "threshold", "expected", "clipped"),
    [
        ("tis", "token", 1.5, [[1.5, 0.5], [1.5, 1.5]], 0.75),
        ("tis", "token", 3.0, [[2.0, 0.5], [2.0, 2.0]], 0.0),
        ("mis", "token", 1.5, [[0.0, 0.0], [0.0, 0.0]], 1.0),  # 0.5 < 1/1.5 is masked too
        ("mis", "token", 3.0, [[2.0, 0.5], [2.0, 2.0]], 0.0),
        ("tis", "sequence", 3.0, [[1.0, 1.0], [3.0, 3.0]], 0.5),
        ("mis", "sequence", 3.0, [[1.0, 1.0], [0.0, 0.0]], 0.5),
    ],
)
def test_weights_are_the_hand_computed_ones(correction, level, threshold, expected, clipped):
    weights, metrics = importance_weights(TARGET, BEHAVIOUR, MASK, correction, level, threshold)
    torch.testing.assert_close(weights, torch.tensor(expected))
    assert metrics["is_clipped_fraction"] == pytest.approx(clipped)
    assert metrics["is_weight_mean"] == pytest.approx(sum(map(sum, expected)) / 4)
    assert metrics["is_log_ratio_abs_mean"] > 0


def test_padding_gets_no_weight_and_no_part_in_a_sequence_ratio():
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    weights, metrics = importance_weights(TARGET, BEHAVIOUR, mask, "tis", "sequence", 10.0)
    # row 0's sequence ratio is its first token's (2.0); the padded token has weight 0
    torch.testing.assert_close(weights, torch.tensor([[2.0, 0.0], [4.0, 4.0]]))
    assert metrics["is_weight_mean"] == pytest.approx((2.0 + 4.0 + 4.0) / 3)


def test_an_explicit_lower_bound_and_bad_bounds():
    weights, _ = importance_weights(TARGET, BEHAVIOUR, MASK, "mis", "token", 3.0, 0.4)
    torch.testing.assert_close(weights, torch.tensor([[2.0, 0.5], [2.0, 2.0]]))
    with pytest.raises(ValueError, match="threshold must be > 1"):
        importance_weights(TARGET, BEHAVIOUR, MASK, "tis", "token", 1.0)
    with pytest.raises(ValueError, match="level 'batch'"):
        importance_weights(TARGET, BEHAVIOUR, MASK, "tis", "batch", 2.0)


def test_decoupled_ppo_weights_the_ppo_loss_by_proximal_over_behaviour():
    logprobs = torch.tensor([[LOG(0.5)]], requires_grad=True)
    prox, behav = torch.tensor([[LOG(0.5)]]), torch.tensor([[LOG(0.25)]])
    common = dict(
        logprobs=logprobs,
        old_logprobs=prox,
        advantages=torch.tensor([[1.0]]),
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
        loss_mask=torch.tensor([[1.0]]),
        loss_agg_mode="weighted-sum",
    )
    loss, metrics = compute_decoupled_ppo_loss(**common, behaviour_logprobs=behav)
    # PPO at ratio 1 with A = 1 is -1; pi_prox / pi_behav = 2 (below the default cap 5)
    assert float(loss.detach()) == pytest.approx(-2.0)
    loss.backward()
    assert float(logprobs.grad) == pytest.approx(-2.0)  # d(-w * exp(lp - prox)) / d lp
    assert metrics["behaviour_weight_mean"] == pytest.approx(2.0)
    capped, metrics = compute_decoupled_ppo_loss(
        **common, behaviour_logprobs=behav, behaviour_weight_cap=1.5
    )
    assert float(capped.detach()) == pytest.approx(-1.5)
    assert metrics["behaviour_clipped_fraction"] == 1.0
    with pytest.raises(ValueError, match="needs the behaviour policy's log-probs"):
        compute_decoupled_ppo_loss(**common)


class _Policy(torch.nn.Module):
    """Log-probs that are a trainable offset of the batch's old log-probs."""

    def __init__(self) -> None:
        super().__init__()
        self.shift = torch.nn.Parameter(torch.zeros(()))

    def forward(self, forward_type, forward_inputs, **_):
        lp = self.old + self.shift
        return {"logprobs": lp, "entropy": torch.zeros_like(lp)}


def _update(batch, **algo_fields):
    cfg = load_config(
        overrides=["algorithm.adv_type=gae", "actor.num_minibatches=1", "actor.update_epochs=1"]
    )
    algo = llm_algorithm(cfg.algorithm).model_copy(update=algo_fields)
    policy = _Policy()
    policy.old = batch["old_logprobs"]
    opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    out = llm_update(policy, opt, batch, minibatch_totals([batch], 1), algo, llm_actor(cfg.actor))
    return float(policy.shift.detach()), out


def test_the_update_applies_the_correction_and_logs_its_statistics():
    batch = random_llm_batch(4, seed=3)
    batch.pop("rollout_logprobs")
    plain, out = _update(dict(batch))
    assert "train/is_weight_mean" not in out
    same = {**batch, "rollout_logprobs": batch["old_logprobs"].clone()}
    identity, out = _update(same, is_correction="tis")
    assert identity == pytest.approx(plain)  # behaviour == target: weights 1
    assert out["train/is_weight_mean"] == pytest.approx(1.0)
    shifted = {**batch, "rollout_logprobs": batch["old_logprobs"] - 1.0}  # ratio e > 2
    corrected, out = _update(shifted, is_correction="tis", is_threshold=2.0)
    assert out["train/is_clipped_fraction"] == pytest.approx(1.0)
    assert corrected == pytest.approx(2.0 * plain)  # every token weighted by 2
    with pytest.raises(ValueError, match="needs the rollout engine's log-probs"):
        _update(dict(batch), is_correction="mis")


def test_config_rules():
    reasoning = [
        "model.model_type=hf_causal_lm",
        "model.model_path=x",
        "model.tiny_init=true",
        "algorithm.adv_type=grpo",
        "reward.reward_type=math_verify",
    ]
    cfg = load_config(None, [*reasoning, "algorithm.loss_type=decoupled_ppo"])
    assert cfg.algorithm.behaviour_weight_cap == 5.0
    with pytest.raises(ConfigError, match="correct the same ratio twice"):
        load_config(
            None, [*reasoning, "algorithm.loss_type=decoupled_ppo", "algorithm.is_correction=tis"]
        )
    # embodied PPO records its behaviour log-probs too (async mode's stale batches)
    assert load_config(None, ["algorithm.loss_type=decoupled_ppo"]).algorithm.loss_type == (
        "decoupled_ppo"
    )
    with pytest.raises(ConfigError, match="algorithm.is_correction = 'bogus'"):
        load_config(None, [*reasoning, "algorithm.is_correction=bogus"])
