"""A small CNN actor-critic over ``main_images``, written against rlpipe's policy contract.

It shows everything a custom policy provides: env-ready actions and the cached
``forward_inputs`` from :meth:`predict_action_batch`, log-probs/values/entropy from
:meth:`default_forward`, and critic values from :meth:`value_forward`. rlpipe's workers
call only these methods; they never look at the model type.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from rl_core.api import BasePolicy, multinomial_on_device, obs_tensor, policy_device


class CNNActorCritic(BasePolicy):
    """Conv trunk shared by a categorical actor head and a value head.

    Args:
        image_shape: ``(H, W, C)`` of the observation images.
        num_actions: Size of the ``Discrete`` action space.
        channels: Output channels of the 3x3 conv layers.
        hidden_size: Width of the dense layer after the convs.
    """

    def __init__(
        self,
        image_shape: tuple[int, int, int],
        num_actions: int,
        channels: tuple[int, ...] = (16, 32),
        hidden_size: int = 64,
    ) -> None:
        super().__init__()
        height, width, in_channels = image_shape
        layers: list[nn.Module] = []
        for out_channels in channels:
            layers += [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.ReLU()]
            in_channels = out_channels
        layers += [
            nn.Flatten(),
            nn.Linear(in_channels * height * width, hidden_size),
            nn.ReLU(),
        ]
        self.trunk = nn.Sequential(*layers)
        self.actor = nn.Linear(hidden_size, num_actions)
        self.critic = nn.Linear(hidden_size, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)

    def _features(self, images: Any) -> torch.Tensor:
        # images go to the policy's device (a GPU or the CPU), whatever they arrive as
        pixels = obs_tensor(images, policy_device(self), torch.uint8)
        # [B, H, W, C] uint8 -> [B, C, H, W] float in [0, 1]
        return self.trunk(pixels.permute(0, 3, 1, 2).float() / 255.0)

    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = True,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Sample (``train``) or take the most likely (``eval``) action per image."""
        images = obs_tensor(env_obs["main_images"], policy_device(self), torch.uint8)
        features = self._features(images)
        dist = Categorical(logits=self.actor(features))
        if mode == "eval":
            actions = dist.probs.argmax(-1)
        else:  # drawn with the worker's CPU generator, moved to the policy's device
            actions = multinomial_on_device(dist.probs, generator)
        result = {
            "prev_logprobs": dist.log_prob(actions),
            "prev_values": self.critic(features).squeeze(-1) if compute_values else None,
            "forward_inputs": {"main_images": images, "actions": actions},
        }
        return actions.cpu().numpy(), result

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Log-probs of the cached actions, values and entropy, with gradients."""
        features = self._features(forward_inputs["main_images"])
        dist = Categorical(logits=self.actor(features))
        out = {"logprobs": dist.log_prob(forward_inputs["actions"])}
        if compute_values:
            out["values"] = self.critic(features).squeeze(-1)
        if compute_entropy:
            out["entropy"] = dist.entropy()
        return out

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B] of observations (used to bootstrap advantages)."""
        return self.critic(self._features(env_obs["main_images"])).squeeze(-1)


def build_cnn_actor_critic(model_cfg: Any, spaces: Any) -> CNNActorCritic:
    """Model builder (``model.model_type: cnn_actor_critic``).

    Reads the extra ``model`` keys ``channels`` and ``hidden_size`` (rlpipe keeps unknown
    keys of the ``model`` section for custom models).
    """
    obs, act = spaces.observation_space, spaces.action_space
    if not (isinstance(obs, gym.spaces.Box) and obs.dtype == np.uint8 and len(obs.shape) == 3):
        raise ValueError(f"cnn_actor_critic needs (H, W, C) uint8 image observations, got {obs}")
    if not isinstance(act, gym.spaces.Discrete):
        raise ValueError(f"cnn_actor_critic needs a Discrete action space, got {act}")
    extra = model_cfg.model_extra or {}
    return CNNActorCritic(
        image_shape=tuple(int(d) for d in obs.shape),
        num_actions=int(act.n),
        channels=tuple(int(c) for c in extra.get("channels", (16, 32))),
        hidden_size=int(extra.get("hidden_size", 64)),
    )
