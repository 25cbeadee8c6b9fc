"""Built-in MLP actor-critic for flat observations, discrete or continuous actions."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rl_core.models.action_heads import ActionHeadMixin, mlp
from rl_core.models.base_policy import BasePolicy, flat_states, policy_device
from rl_core.models.registry import register_model


class MLPActorCritic(ActionHeadMixin, BasePolicy):
    """Separate actor and critic MLPs over ``env_obs["states"]``.

    Discrete action spaces use a categorical head; Box spaces a diagonal Gaussian with a
    state-independent log-std, whose samples are either clipped to the bounds (``clip``,
    log-prob of the unclipped sample) or squashed with tanh and rescaled (``tanh``, with the
    change-of-variables correction); see :mod:`rl_core.models.action_heads`.

    Args:
        obs_dim: Flat observation size.
        action_space: A ``Discrete`` or 1-D ``Box`` gymnasium space.
        hidden_sizes: Widths of the hidden layers.
        activation: ``tanh``, ``relu`` or ``gelu``.
        continuous_action: ``clip`` or ``tanh``.
        init_log_std: Initial log standard deviation of the Gaussian head.
        critic_hidden_sizes: Widths of the critic's hidden layers (None: ``hidden_sizes``).
    """

    #: The model's name in error messages.
    model_type = "mlp_actor_critic"

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        activation: str = "tanh",
        continuous_action: str = "clip",
        init_log_std: float = 0.0,
        critic_hidden_sizes: list[int] | None = None,
    ) -> None:
        super().__init__()
        out_dim = self._init_action_head(
            action_space, continuous_action, init_log_std, self.model_type
        )
        self.actor = mlp([obs_dim, *hidden_sizes, out_dim], activation, 0.01)
        critic_sizes = hidden_sizes if critic_hidden_sizes is None else critic_hidden_sizes
        self.critic = mlp([obs_dim, *critic_sizes, 1], activation, 1.0)

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
        states = flat_states(env_obs, policy_device(self))
        return self._act(
            self.actor(states),
            mode,
            generator,
            {"states": states},
            lambda: self.critic(states).squeeze(-1),
            compute_values,
        )

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Recompute logprobs/values/entropy for cached ``states`` and ``model_action``."""
        states = forward_inputs["states"]
        return self._score(
            self.actor(states),
            forward_inputs["model_action"],
            lambda: self.critic(states).squeeze(-1),
            compute_values,
            compute_entropy,
        )

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B]."""
        return self.critic(flat_states(env_obs, policy_device(self))).squeeze(-1)

    def demo_forward_inputs(self, env_obs: dict[str, Any], actions: Any) -> dict[str, torch.Tensor]:
        """``states`` and the model action of the demonstrated env ``actions``.

        See :meth:`BasePolicy.demo_forward_inputs`.
        """
        device = policy_device(self)
        return {
            "states": flat_states(env_obs, device),
            "model_action": self._from_env_action(actions, device),
        }


def build_mlp_actor_critic(cfg: Any, spaces: Any) -> MLPActorCritic:
    """Builder registered as ``mlp_actor_critic``."""
    obs_space = spaces.observation_space
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"mlp_actor_critic needs a Box observation space, got {obs_space}")
    return MLPActorCritic(
        obs_dim=int(np.prod(obs_space.shape)),
        action_space=spaces.action_space,
        hidden_sizes=list(cfg.hidden_sizes),
        activation=cfg.activation,
        continuous_action=cfg.continuous_action,
        init_log_std=cfg.init_log_std,
    )


register_model("mlp_actor_critic", build_mlp_actor_critic, category="embodied")
