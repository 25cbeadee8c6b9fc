"""Demonstrations through ``demo_forward_inputs``: scored, cloned, at the tanh bounds.

The MLP, CNN and VLA policies score their own eval actions, a behaviour cloning step raises
a demonstration's log-prob, and cloning fits a fixed image-to-action map.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rl_core.models import BasePolicy
from rl_core.models.mlp_actor_critic import MLPActorCritic
from rl_core.training.behaviour_cloning import bc_step
from rl_core.training.nonfinite import SkippedUpdateGuard
from tests.pixel_policies import (
    CHUNK,
    CHUNK_BOX,
    STEP_DIM,
    eval_mean,
    kick,
    observations,
    pixel_policy,
    vla_policy,
)


def _policies(tiny_lm: Path) -> list[tuple[str, BasePolicy, dict[str, Any]]]:
    box = gym.spaces.Box(-2.0, 1.0, (3,), np.float32)
    torch.manual_seed(0)
    mlp = MLPActorCritic(4, box, [16], continuous_action="tanh", init_log_std=-0.5)
    mlp_discrete = MLPActorCritic(4, gym.spaces.Discrete(3), [16])
    states = {"states": observations(5)["states"]}
    return [
        ("mlp-tanh", mlp, states),
        ("mlp-discrete", mlp_discrete, states),
        ("pixel-clip", pixel_policy(box, init_log_std=-0.5), observations(5)),
        ("pixel-tanh", pixel_policy(box, continuous_action="tanh"), observations(5)),
        ("pixel-discrete", pixel_policy(gym.spaces.Discrete(4)), observations(5)),
        ("vla-clip", vla_policy(tiny_lm), observations(5)),
        ("vla-tanh", vla_policy(tiny_lm, continuous_action="tanh"), observations(5)),
    ]


def test_demo_forward_inputs_score_the_policys_own_eval_actions(tiny_lm: Path) -> None:
    for name, policy, obs in _policies(tiny_lm):
        kick(policy)
        eval_actions, eval_result = policy.predict_action_batch(obs, mode="eval")
        inputs = policy.demo_forward_inputs(obs, eval_actions)
        logprobs = policy.default_forward(inputs)["logprobs"]
        torch.testing.assert_close(
            logprobs, eval_result["prev_logprobs"], atol=1e-3, rtol=1e-4, msg=name
        )
        if "tanh" not in name:  # the mean is the mode (a squashed density's is elsewhere)
            sampled = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(0))
            assert (logprobs >= sampled[1]["prev_logprobs"] - 1e-3).all(), name


def test_demo_actions_at_tanh_bounds_stay_finite(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm, continuous_action="tanh")
    obs = observations(2)
    corners = np.stack([CHUNK_BOX.low, CHUNK_BOX.high])
    inputs = policy.demo_forward_inputs(obs, corners)
    assert torch.isfinite(inputs["model_action"]).all()
    assert torch.isfinite(policy.default_forward(inputs)["logprobs"]).all()


def test_a_bc_step_raises_the_demonstrated_actions_logprob(tiny_lm: Path) -> None:
    for name, policy, obs in _policies(tiny_lm):
        space_actions, _ = policy.predict_action_batch(
            obs, generator=torch.Generator().manual_seed(9)
        )
        demo = policy.demo_forward_inputs(obs, space_actions)
        before = policy.default_forward(demo, compute_values=False)["logprobs"].mean()
        optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
        optimizer.zero_grad()
        (-before).backward()
        optimizer.step()
        after = policy.default_forward(demo, compute_values=False)["logprobs"].mean()
        assert after > before, name


def test_mlp_without_demo_support_names_its_type() -> None:
    class NoDemos(BasePolicy):
        def default_forward(self, forward_inputs, compute_values=True, compute_entropy=True):
            return {}

        def predict_action_batch(self, env_obs, mode="train", compute_values=True, **kwargs):
            return None, {}

    with pytest.raises(NotImplementedError, match="NoDemos does not implement demo_forward"):
        NoDemos().demo_forward_inputs({}, np.zeros(1))


class _ImageDemos:
    """A fixed image -> action map, shaped like :class:`rl_core.data.demos.Demos`."""

    def __init__(self, n: int = 8) -> None:
        self.obs = observations(n, seed=4)
        rng = np.random.default_rng(5)
        self.actions = rng.uniform(-0.8, 0.8, (n, CHUNK * STEP_DIM)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.actions)

    def env_obs(self, rows: np.ndarray) -> dict[str, Any]:
        return {k: v[rows] for k, v in self.obs.items()}


@pytest.mark.parametrize("model", ["pixel_actor_critic", "vla_oft"])
def test_behaviour_cloning_fits_a_fixed_image_to_action_map(model: str, tiny_lm: Path) -> None:
    demos = _ImageDemos()
    if model == "vla_oft":
        policy = vla_policy(tiny_lm, init_log_std=-1.0)
    else:
        policy = pixel_policy(CHUNK_BOX, init_log_std=-1.0)
    optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
    guard, gen = SkippedUpdateGuard(3), torch.Generator().manual_seed(0)
    losses = [
        bc_step(policy, optimizer, demos, 8, gen, 1.0, guard, 0, 5e-3)["train/bc_loss"]
        for _ in range(100)
    ]
    assert losses[-1] < losses[0] - 1.0, losses
    mean = eval_mean(policy, demos.obs)
    start = np.abs(demos.actions).mean()
    assert float((mean - torch.as_tensor(demos.actions)).abs().mean()) < 0.5 * start
