"""Small pixel policies, their spaces and observations, shared by the pixel policy tests.

A 16x16 image with 4 states and an instruction; the VLA acts in chunks of 3 two-number
actions over the tiny byte-level causal LM (the ``tiny_lm`` fixture of the unit tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from kinds.embodied.sections import EmbodiedModelConfig
from rl_core.envs import EnvSpaces
from rl_core.models import BasePolicy, get_model
from rl_core.models.vla_oft import VLAOFTPolicy

IMAGE = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
STATES = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
TEXT = gym.spaces.Text(64)
CHUNK, STEP_DIM = 3, 2
CHUNK_BOX = gym.spaces.Box(-1.0, 1.0, (CHUNK * STEP_DIM,), np.float32)
SMALL_CNN = {"cnn_channels": [8, 16], "cnn_feature_dim": 32, "hidden_sizes": [32]}


def pixel_policy(
    action_space: gym.Space, obs_space: gym.Space | None = None, **cfg: Any
) -> BasePolicy:
    """A seeded small ``pixel_actor_critic`` (images and states unless ``obs_space``)."""
    if obs_space is None:
        obs_space = gym.spaces.Dict({"main_images": IMAGE, "states": STATES})
    model = EmbodiedModelConfig(model_type="pixel_actor_critic", **{**SMALL_CNN, **cfg})
    torch.manual_seed(0)
    return get_model(model, EnvSpaces(obs_space, action_space))


def vla_config(path: Path, **cfg: Any) -> EmbodiedModelConfig:
    """The model section of a small ``vla_oft`` over the backbone at ``path``."""
    fields = {
        "model_type": "vla_oft",
        "model_path": str(path),
        "action_chunk": CHUNK,
        "num_image_tokens": 4,
        "max_instruction_tokens": 32,
        "init_log_std": -0.5,
        **SMALL_CNN,
        **cfg,
    }
    return EmbodiedModelConfig(**fields)


def vla_spaces(states: bool = True) -> EnvSpaces:
    """Images, instructions and (when ``states``) states; chunked continuous actions."""
    keys = {"main_images": IMAGE, "task_descriptions": TEXT}
    if states:
        keys["states"] = STATES
    return EnvSpaces(gym.spaces.Dict(keys), CHUNK_BOX)


def vla_policy(path: Path, states: bool = True, **cfg: Any) -> VLAOFTPolicy:
    """A seeded small ``vla_oft`` over the backbone at ``path``."""
    torch.manual_seed(0)
    return get_model(vla_config(path, **cfg), vla_spaces(states))


def observations(n: int = 4, seed: int = 0, texts: list[str] | None = None) -> dict[str, Any]:
    """``n`` random observations of images, states and instructions (``texts`` or two)."""
    rng = np.random.default_rng(seed)
    texts = texts or [["pick up the red block", "open the drawer"][i % 2] for i in range(n)]
    return {
        "main_images": rng.integers(0, 256, (n, *IMAGE.shape), dtype=np.uint8),
        "states": rng.uniform(-1, 1, (n, *STATES.shape)).astype(np.float32),
        "task_descriptions": np.array(texts),
    }


def kick(policy: torch.nn.Module, scale: float = 0.05, seed: int = 7) -> None:
    """Move the parameters away from their init (the action heads start at ~0 means)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in policy.parameters():
            if param.is_floating_point():
                param.add_(scale * torch.randn(param.shape, generator=gen).to(param.dtype))


def eval_mean(policy: BasePolicy, obs: dict[str, Any]) -> torch.Tensor:
    """The unclipped action mean (the eval-mode model action)."""
    return policy.predict_action_batch(obs, mode="eval")[1]["forward_inputs"]["model_action"]
