"""Building the pixel policies: registration, observation and backbone checks, config bounds."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from kinds.embodied.sections import EmbodiedModelConfig
from rl_core.envs import EnvSpaces
from rl_core.models import MODELS, get_model
from rl_core.models.pixel_actor_critic import PixelActorCritic
from rl_core.models.vla_oft import VLAOFTPolicy
from tests.pixel_policies import (
    CHUNK_BOX,
    STATES,
    TEXT,
    pixel_policy,
    vla_config,
    vla_policy,
    vla_spaces,
)


def test_models_are_registered_as_embodied(tiny_lm: Path) -> None:
    assert MODELS.get("pixel_actor_critic").category == "embodied"
    assert MODELS.get("VLA_OFT").category == "embodied"  # names are case-insensitive
    assert isinstance(pixel_policy(gym.spaces.Discrete(3)), PixelActorCritic)
    assert isinstance(vla_policy(tiny_lm), VLAOFTPolicy)


@pytest.mark.parametrize("model_type", ["pixel_actor_critic", "vla_oft"])
def test_observations_without_main_images_are_a_clear_error(model_type: str, tiny_lm: Path) -> None:
    model = EmbodiedModelConfig(model_type=model_type, model_path=str(tiny_lm))
    spaces = EnvSpaces(gym.spaces.Dict({"states": STATES, "task_descriptions": TEXT}), CHUNK_BOX)
    with pytest.raises(ValueError, match=r"needs a 'main_images' key .* it has \['states', "):
        get_model(model, spaces)
    with pytest.raises(ValueError, match="needs image observations"):
        get_model(model, EnvSpaces(STATES, CHUNK_BOX))


def test_vla_checks_its_backbone_and_action_chunk(tiny_lm: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="action_chunk = 4 must divide"):
        vla_policy(tiny_lm, action_chunk=4)
    with pytest.raises(ValueError, match="not a local Hugging Face model directory"):
        vla_policy(tmp_path)
    with pytest.raises(ValueError, match="supports 1-D Box action spaces"):
        get_model(
            vla_config(tiny_lm), EnvSpaces(vla_spaces().observation_space, gym.spaces.Discrete(3))
        )
    with pytest.raises(ValueError, match="max_position_embeddings"):
        vla_policy(tiny_lm, max_instruction_tokens=300)


def test_model_config_bounds() -> None:
    cfg = EmbodiedModelConfig()
    assert cfg.cnn_channels == [32, 64, 64] and cfg.action_chunk == 1 and cfg.model_path is None
    assert not cfg.trust_remote_code and cfg.dtype == "float32"
    for bad in ({"cnn_channels": []}, {"cnn_channels": [0]}, {"action_chunk": 0}):
        with pytest.raises(ValueError):
            EmbodiedModelConfig(**bad)
