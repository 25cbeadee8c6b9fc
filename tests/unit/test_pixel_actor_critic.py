"""The CNN actor-critic (``pixel_actor_critic``): seeded actions, exact log-probs, export."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from infra.checkpoint.export import export_policy, load_exported_policy
from kinds.embodied.sections import EmbodiedModelConfig
from rl_core.envs import EnvSpaces
from tests.pixel_policies import (
    CHUNK_BOX,
    IMAGE,
    SMALL_CNN,
    STATES,
    kick,
    observations,
    pixel_policy,
)
from tests.policy_checks import (
    assert_eval_actions_ignore_the_generator,
    assert_same_outputs,
    assert_training_recomputes_the_rollout,
)


@pytest.mark.parametrize(
    ("action_space", "squash", "obs_space"),
    [
        pytest.param(gym.spaces.Discrete(5), "clip", None, id="discrete"),
        pytest.param(gym.spaces.Box(-2.0, 1.0, (3,), np.float32), "clip", None, id="clip"),
        pytest.param(gym.spaces.Box(-2.0, 1.0, (3,), np.float32), "tanh", None, id="tanh"),
        pytest.param(gym.spaces.Discrete(5), "clip", IMAGE, id="image-box"),
    ],
)
def test_pixel_policy_acts_and_recomputes_its_logprobs(action_space, squash, obs_space) -> None:
    policy = pixel_policy(action_space, obs_space, continuous_action=squash)
    kick(policy)
    obs = observations(6)
    if obs_space is IMAGE:
        obs = {"main_images": obs["main_images"]}
    actions, result = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(1))
    assert actions.shape == (6, *action_space.shape)
    assert all(action_space.contains(a.astype(action_space.dtype)) for a in actions)
    inputs = result["forward_inputs"]
    assert inputs["main_images"].dtype == torch.uint8
    assert ("states" in inputs) == (obs_space is None)
    assert_training_recomputes_the_rollout(policy, obs, result)
    # seeded: the same generator seed gives the same actions, another seed others
    again, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(1))
    other, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(actions, again)
    assert not np.array_equal(actions, other)
    assert_eval_actions_ignore_the_generator(policy, obs)


def test_exported_pixel_policy_acts_like_the_original(tmp_path: Path) -> None:
    policy = pixel_policy(CHUNK_BOX).eval()
    kick(policy)
    spaces = EnvSpaces(gym.spaces.Dict({"main_images": IMAGE, "states": STATES}), CHUNK_BOX)
    model = EmbodiedModelConfig(model_type="pixel_actor_critic", **SMALL_CNN)
    out = export_policy(policy, model.model_dump(mode="json"), spaces, tmp_path / "cnn")
    loaded, meta = load_exported_policy(out)
    assert meta["weights_format"] == "state_dict"
    assert_same_outputs(policy, loaded, observations(3))
