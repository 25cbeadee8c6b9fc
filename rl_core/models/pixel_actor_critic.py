"""Built-in CNN actor-critic over ``main_images`` (and ``states``), discrete or continuous.

``model.model_type: pixel_actor_critic``. The image goes through the small conv encoder
(:class:`~rl_core.models.image_encoder.ImageEncoder`, ``model.cnn_channels`` and
``model.cnn_feature_dim``); its features, concatenated with ``states`` when the
observation space has them, feed an actor MLP and a critic MLP (``model.hidden_sizes``).
The action head is the MLP actor-critic's (:mod:`rl_core.models.action_heads`):
categorical for ``Discrete`` spaces, a Gaussian clipped or tanh-squashed for ``Box``.

(The name ``cnn_actor_critic`` belongs to the ``examples/ext_policy`` extension, which
registers its own model under it.)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rl_core.models.action_heads import ActionHeadMixin, mlp
from rl_core.models.base_policy import BasePolicy, policy_device
from rl_core.models.image_encoder import (
    IMAGE_KEY,
    STATE_KEY,
    ImageEncoder,
    PixelObservationSpec,
    pixel_inputs,
    pixel_observation_spec,
)
from rl_core.models.registry import register_model

MODEL_TYPE = "pixel_actor_critic"


class PixelActorCritic(ActionHeadMixin, BasePolicy):
    """A conv encoder shared by an actor MLP and a critic MLP.

    ``forward_inputs``: ``main_images`` (uint8 ``[B, H, W, C]``), ``states`` (float32
    ``[B, D]``, when the observations have them) and ``model_action``.

    Args:
        spec: Image shape and state size of the observations.
        action_space: A ``Discrete`` or 1-D ``Box`` gymnasium space.
        cnn_channels: Output channels of the encoder's conv layers.
        cnn_feature_dim: Size of the encoder's feature vector.
        hidden_sizes: Hidden widths of the actor and critic MLPs.
        activation: ``tanh``, ``relu`` or ``gelu`` (of the MLPs).
        continuous_action: ``clip`` or ``tanh``.
        init_log_std: Initial log standard deviation of the Gaussian head.
    """

    def __init__(
        self,
        spec: PixelObservationSpec,
        action_space: gym.Space,
        cnn_channels: list[int],
        cnn_feature_dim: int,
        hidden_sizes: list[int],
        activation: str = "tanh",
        continuous_action: str = "clip",
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        out_dim = self._init_action_head(action_space, continuous_action, init_log_std, MODEL_TYPE)
        self.spec = spec
        self.encoder = ImageEncoder(spec.image_shape, cnn_channels, cnn_feature_dim)
        in_dim = cnn_feature_dim + spec.state_dim
        self.actor = mlp([in_dim, *hidden_sizes, out_dim], activation, 0.01)
        self.critic = mlp([in_dim, *hidden_sizes, 1], activation, 1.0)

    def _features(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        features = self.encoder(inputs[IMAGE_KEY])
        if self.spec.state_dim:
            features = torch.cat([features, inputs[STATE_KEY].to(features.dtype)], dim=-1)
        return features

    # -- contract ------------------------------------------------------------------------
    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = True,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """See :meth:`BasePolicy.predict_action_batch`; ``generator`` drives sampling."""
        inputs = pixel_inputs(env_obs, self.spec, policy_device(self))
        features = self._features(inputs)
        return self._act(
            self.actor(features),
            mode,
            generator,
            inputs,
            lambda: self.critic(features).squeeze(-1),
            compute_values,
        )

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Recompute logprobs/values/entropy for cached images (states) and model actions."""
        features = self._features(forward_inputs)
        return self._score(
            self.actor(features),
            forward_inputs["model_action"],
            lambda: self.critic(features).squeeze(-1),
            compute_values,
            compute_entropy,
        )

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B] of raw observations."""
        inputs = pixel_inputs(env_obs, self.spec, policy_device(self))
        return self.critic(self._features(inputs)).squeeze(-1)

    def demo_forward_inputs(self, env_obs: dict[str, Any], actions: Any) -> dict[str, torch.Tensor]:
        """The observations' inputs and the model action of the demonstrated env ``actions``.

        See :meth:`BasePolicy.demo_forward_inputs`.
        """
        device = policy_device(self)
        inputs = pixel_inputs(env_obs, self.spec, device)
        return {**inputs, "model_action": self._from_env_action(actions, device)}


def build_pixel_actor_critic(cfg: Any, spaces: Any) -> PixelActorCritic:
    """Builder registered as ``pixel_actor_critic``.

    Raises:
        ValueError: The observation space has no ``main_images`` image, or the action
            space is neither ``Discrete`` nor a 1-D ``Box``.
    """
    return PixelActorCritic(
        spec=pixel_observation_spec(spaces.observation_space, MODEL_TYPE),
        action_space=spaces.action_space,
        cnn_channels=list(cfg.cnn_channels),
        cnn_feature_dim=int(cfg.cnn_feature_dim),
        hidden_sizes=list(cfg.hidden_sizes),
        activation=cfg.activation,
        continuous_action=cfg.continuous_action,
        init_log_std=cfg.init_log_std,
    )


register_model(MODEL_TYPE, build_pixel_actor_critic, category="embodied")
