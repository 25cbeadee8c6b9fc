"""JSON form of gymnasium spaces (stored with checkpoints and exported models)."""

import json

import gymnasium as gym
import numpy as np
import pytest

from rl_core.envs import EnvSpaces
from rl_core.envs.spaces import (
    env_spaces_from_dict,
    env_spaces_to_dict,
    space_from_dict,
    space_to_dict,
)

SPACES = [
    gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
    gym.spaces.Box(
        np.array([-np.inf, 0.0]), np.array([np.inf, 1.0]), dtype=np.float64
    ),  # infinite bounds
    gym.spaces.Box(0, 255, (7, 5, 3), np.uint8),
    gym.spaces.Discrete(4, start=-1),
    gym.spaces.MultiDiscrete([3, 5, 2]),
    gym.spaces.MultiBinary(6),
    gym.spaces.Dict(
        {
            "states": gym.spaces.Box(-1, 1, (2,), np.float32),
            "main_images": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
        }
    ),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,), np.float32)]),
    gym.spaces.Dict(  # a VLA env's observations: an image and an instruction
        {
            "main_images": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "task_descriptions": gym.spaces.Text(64),
        }
    ),
    gym.spaces.Text(5, min_length=2, charset="ab c"),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_round_trip_through_json_text(space):
    text = json.dumps(space_to_dict(space))
    back = space_from_dict(json.loads(text))
    assert back == space
    assert back.dtype == space.dtype


def test_env_spaces_round_trip():
    spaces = EnvSpaces(SPACES[0], SPACES[3])
    back = env_spaces_from_dict(json.loads(json.dumps(env_spaces_to_dict(spaces))))
    assert back == spaces


def test_unsupported_space_names_the_codec_registry():
    with pytest.raises(TypeError, match="register_space_codec"):
        space_to_dict(gym.spaces.Sequence(gym.spaces.Discrete(2)))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"type": "Hyperbox"}, "unknown space description"),
        ("Box", "unknown space description"),
        ({"type": "Discrete"}, "malformed Discrete space description"),
        (
            {"type": "Box", "low": [0], "high": [1], "shape": [2], "dtype": "float32"},
            "malformed Box",
        ),
    ],
)
def test_bad_descriptions_are_clear_errors(data, match):
    with pytest.raises(ValueError, match=match):
        space_from_dict(data)
