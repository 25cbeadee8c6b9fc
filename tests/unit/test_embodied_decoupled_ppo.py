"""Decoupled PPO for embodied runs: the PPO clip is taken against the weights before the
update (recomputed by the trainer), and each sample is weighted by proximal / behaviour."""

from __future__ import annotations

import copy
import math

import torch

from rl_core.training.ppo import ppo_update
from tests.unit.test_nonfinite_updates import ppo_batch, ppo_setup


def run_update(loss_type: str, batch: dict) -> tuple[dict, dict]:
    cfg, policy, optimizer = ppo_setup(f"algorithm.loss_type={loss_type}")
    metrics = ppo_update(
        policy, optimizer, batch, cfg.algorithm, cfg.actor, torch.Generator().manual_seed(0)
    )
    return metrics, policy.state_dict()


def test_fresh_samples_update_like_ppo():
    """Sampled with the trainer's own weights, proximal = behaviour: every weight is 1."""
    _, policy, _ = ppo_setup()
    batch = ppo_batch(policy)
    ppo_metrics, ppo_weights = run_update("ppo", copy.deepcopy(batch))
    metrics, weights = run_update("decoupled_ppo", copy.deepcopy(batch))
    assert metrics["train/behaviour_weight_mean"] == 1.0
    assert metrics["train/behaviour_clipped_fraction"] == 0.0
    for name, value in ppo_weights.items():
        torch.testing.assert_close(weights[name], value, rtol=1e-5, atol=1e-6)


def test_stale_samples_are_weighted_by_proximal_over_behaviour_and_capped():
    _, policy, _ = ppo_setup()
    batch = ppo_batch(policy)
    # behaviour policy 1.5x less likely to take each action than the trainer's weights
    batch["prev_logprobs"] = batch["prev_logprobs"] - math.log(1.5)
    metrics, _ = run_update("decoupled_ppo", copy.deepcopy(batch))
    assert math.isclose(metrics["train/behaviour_weight_mean"], 1.5, rel_tol=1e-5)
    assert metrics["train/behaviour_clipped_fraction"] == 0.0
    # ...and 10x less likely: the weight is capped at algorithm.behaviour_weight_cap (5)
    batch["prev_logprobs"] = batch["prev_logprobs"] + math.log(1.5) - math.log(10.0)
    metrics, _ = run_update("decoupled_ppo", copy.deepcopy(batch))
    assert math.isclose(metrics["train/behaviour_weight_mean"], 5.0, rel_tol=1e-5)
    assert metrics["train/behaviour_clipped_fraction"] == 1.0
    # plain PPO clips against the behaviour log-probs: a 10x ratio is clipped from the start
    ppo_metrics, _ = run_update("ppo", copy.deepcopy(batch))
    assert ppo_metrics["train/clipfrac"] > metrics["train/clipfrac"]
