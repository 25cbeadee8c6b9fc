"""episode_grpo: group-relative advantages of whole episodes of envs sharing a reset seed."""

import pytest
import torch

from rl_core.algorithms import get_advantage
from rl_core.config import ConfigError, load_config


def done_at_end(t, n):
    truncated = torch.zeros(t, n, dtype=torch.bool)
    truncated[-1] = True
    return torch.zeros(t, n, dtype=torch.bool), truncated


def test_each_step_takes_its_episode_advantage_within_its_group():
    estimator = get_advantage("episode_grpo")
    rewards = torch.zeros(4, 4)
    rewards[2, 0] = 1.0  # group 0: env 0 succeeds, env 1 does not
    rewards[1, 2] = rewards[3, 3] = 1.0  # group 1: both succeed: no signal
    terminated, truncated = done_at_end(4, 4)
    adv, returns = estimator(
        rewards=rewards, terminated=terminated, truncated=truncated, group_size=2
    )
    assert adv.shape == (4, 4)
    assert torch.equal(adv, returns)
    assert (adv[:, 0] > 0).all() and (adv[:, 1] < 0).all()
    assert torch.allclose(adv[:, 0], -adv[:, 1])
    assert torch.equal(adv[:, 2:], torch.zeros(4, 2))
    # the unbiased std of (1, 0) is 1/sqrt(2): advantages ±1/sqrt(2)
    assert adv[0, 0].item() == pytest.approx(0.5 / (2**-0.5), rel=1e-5)


def test_an_episode_that_ends_early_is_refused_with_the_fix():
    estimator = get_advantage("episode_grpo")
    terminated, truncated = done_at_end(5, 2)
    terminated[2, 1] = True
    with pytest.raises(ValueError, match="env 1 did not.*rollout.num_steps"):
        estimator(
            rewards=torch.ones(5, 2), terminated=terminated, truncated=truncated, group_size=2
        )
    terminated, truncated = done_at_end(5, 2)
    truncated[-1, 0] = False
    with pytest.raises(ValueError, match="env 0 did not"):
        estimator(
            rewards=torch.ones(5, 2), terminated=terminated, truncated=truncated, group_size=2
        )


def test_config_needs_groups_and_one_episode_per_rollout():
    base = ["algorithm.adv_type=episode_grpo", "env.env_id=Pendulum-v1"]
    with pytest.raises(ConfigError, match="env.group_size must be 2 or more"):
        load_config("ppo_cartpole", base)
    with pytest.raises(ConfigError, match=r"rollout.num_steps \(128\) must equal"):
        load_config("ppo_cartpole", [*base, "env.group_size=4", "env.max_episode_steps=50"])
    cfg = load_config(
        "ppo_cartpole",
        [*base, "env.group_size=4", "env.max_episode_steps=50", "rollout.num_steps=50"],
    )
    assert cfg.algorithm.adv_type == "episode_grpo"
    with pytest.raises(ConfigError, match="estimator of env episodes"):
        load_config("grpo_arith", ["algorithm.adv_type=episode_grpo"])


@pytest.mark.parametrize("setting", ["terminate_on_success", "reset_on_success"])
def test_config_refuses_episodes_that_end_on_success(setting):
    with pytest.raises(ConfigError, match=f"env.manipulation.{setting} = true ends episodes"):
        load_config("grpo_vla_metaworld", [f"env.manipulation.{setting}=true"])


def test_success_ends_an_episode_one_way():
    both = ["env.manipulation.terminate_on_success=true", "env.manipulation.reset_on_success=true"]
    with pytest.raises(ConfigError, match="are both true"):
        load_config("ppo_metaworld", both)
    cfg = load_config("ppo_metaworld", both[1:])
    assert cfg.env.manipulation.reset_on_success and not cfg.env.manipulation.terminate_on_success
