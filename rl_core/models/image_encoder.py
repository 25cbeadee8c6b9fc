"""The small conv encoder of the pixel policies, and what they read from observation spaces.

:class:`ImageEncoder` is the RLinf-style small CNN: a few 3x3 convolutions of stride 2
(each halves the image, so any size works), ReLU after each, then one linear layer with
ReLU to a feature vector. Images arrive as ``main_images`` ``[B, H, W, C]`` uint8 and are
scaled to ``[0, 1]`` inside the encoder, so rollouts can cache them as uint8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl_core.models.base_policy import flat_states, obs_tensor

#: The observation key the pixel policies read their image from.
IMAGE_KEY = "main_images"
#: The observation key of the optional proprioceptive state.
STATE_KEY = "states"


@dataclass(frozen=True)
class PixelObservationSpec:
    """What a pixel policy reads from its observation space.

    Attributes:
        image_shape: ``(H, W, C)`` of ``main_images``.
        state_dim: Size of the flattened ``states`` (0: the observations have none).
    """

    image_shape: tuple[int, int, int]
    state_dim: int


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def pixel_observation_spec(space: gym.Space, model_type: str) -> PixelObservationSpec:
    """Read the image shape and state size of an observation space.

    Accepted: a ``Dict`` with ``main_images`` (a uint8 ``(H, W, C)`` Box) and optionally
    ``states`` (a Box, flattened); other keys (``task_descriptions``...) are ignored. A bare
    uint8 ``(H, W, C)`` Box also works: the vector env passes it as ``main_images``.

    Args:
        space: The single-env observation space.
        model_type: The model's name in error messages.

    Raises:
        ValueError: No ``main_images`` image in the space, or a malformed one.
    """
    if _is_image(space):
        return PixelObservationSpec(tuple(int(d) for d in space.shape), 0)  # type: ignore[arg-type]
    if not isinstance(space, gym.spaces.Dict):
        raise ValueError(
            f"{model_type} needs image observations: a Dict observation space with a "
            f"{IMAGE_KEY!r} key (a uint8 (H, W, C) Box), or such a Box alone; got {space}"
        )
    if IMAGE_KEY not in space.spaces:
        raise ValueError(
            f"{model_type} needs a {IMAGE_KEY!r} key (a uint8 (H, W, C) Box) in the Dict "
            f"observation space; it has {sorted(space.spaces)}"
        )
    image = space.spaces[IMAGE_KEY]
    if not _is_image(image):
        raise ValueError(
            f"{model_type}: observation {IMAGE_KEY!r} must be a uint8 (H, W, C) Box, got {image}"
        )
    state_dim = 0
    if STATE_KEY in space.spaces:
        states = space.spaces[STATE_KEY]
        if not isinstance(states, gym.spaces.Box):
            raise ValueError(f"{model_type}: observation {STATE_KEY!r} must be a Box, got {states}")
        state_dim = int(np.prod(states.shape))
    return PixelObservationSpec(tuple(int(d) for d in image.shape), state_dim)  # type: ignore[arg-type]


def pixel_inputs(
    env_obs: dict[str, Any], spec: PixelObservationSpec, device: torch.device
) -> dict[str, torch.Tensor]:
    """``main_images`` (uint8) and, when the policy reads them, ``states`` (float32) as tensors.

    Args:
        env_obs: The observation dict.
        spec: What the policy reads.
        device: The policy's device.

    Raises:
        KeyError: ``env_obs`` lacks a key the policy reads.
    """
    if IMAGE_KEY not in env_obs:
        raise KeyError(f"env_obs has no {IMAGE_KEY!r} (keys: {sorted(env_obs)})")
    out = {IMAGE_KEY: obs_tensor(env_obs[IMAGE_KEY], device, torch.uint8)}
    if spec.state_dim:
        states = flat_states(env_obs, device)
        out[STATE_KEY] = states.reshape(states.shape[0], -1)
    return out


class ImageEncoder(nn.Module):
    """Convs (3x3, stride 2, ReLU) then a linear layer (ReLU): ``[B, H, W, C]`` uint8 -> features.

    Args:
        image_shape: ``(H, W, C)`` of the images.
        channels: Output channels of the conv layers, one layer each.
        feature_dim: Size of the output feature vector.
    """

    def __init__(
        self, image_shape: tuple[int, int, int], channels: list[int], feature_dim: int
    ) -> None:
        super().__init__()
        height, width, in_channels = image_shape
        layers: list[nn.Module] = []
        for out_channels in channels:
            conv = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1)
            nn.init.orthogonal_(conv.weight, math.sqrt(2))
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.ReLU()]
            in_channels = out_channels
            height, width = (height + 1) // 2, (width + 1) // 2
        self.convs = nn.Sequential(*layers)
        self.flat_dim = in_channels * height * width
        self.linear = nn.Linear(self.flat_dim, feature_dim)
        nn.init.orthogonal_(self.linear.weight, math.sqrt(2))
        nn.init.zeros_(self.linear.bias)
        self.feature_dim = feature_dim

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Features ``[B, feature_dim]`` of uint8 images ``[B, H, W, C]`` (scaled to [0, 1])."""
        pixels = images.permute(0, 3, 1, 2).to(self.linear.weight.dtype) / 255.0
        return torch.relu(self.linear(self.convs(pixels).flatten(1)))
