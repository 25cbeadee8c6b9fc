"""Built-in model of offline RL (IQL) for flat observations and continuous actions.

``mlp_iql`` is :class:`~rl_core.models.mlp_actor_critic.MLPActorCritic` (the behaviour-cloning
MLP: a Gaussian actor with a state-independent log-std, clipped to the bounds or
tanh-squashed, and a state-value critic ``V(s)``) plus an ensemble of Q critics. IQL
(:class:`rl_core.training.iql_update.IQLLearner`) trains all three from a dataset; besides
the rollout contract it offers the forward types the learner calls:

- ``q_forward``: every Q critic's value ``[E, B]`` of observation-action pairs, the env's
  actions rescaled from their bounds to ``[-1, 1]`` inside the model;
- ``v_forward``: ``V(s)`` ``[B]`` of observations.

The actor is the same network as ``mlp_actor_critic``'s (same layer names), so IQL and
behaviour cloning train the same policy and differ only in how they weigh the data.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl_core.models.ensemble_layers import CRITIC_NORMS, ensemble_mlp, ensemble_q_values
from rl_core.models.mlp_actor_critic import MLPActorCritic
from rl_core.models.registry import register_model


class MLPIQLPolicy(MLPActorCritic):
    """MLP actor, state-value critic ``V(s)`` and Q-critic ensemble over ``env_obs["states"]``.

    Args:
        obs_dim: Flat observation size.
        action_space: A 1-D ``Box`` with finite bounds.
        hidden_sizes: Hidden widths of the actor.
        critic_hidden_sizes: Hidden widths of ``V`` and of each Q critic.
        activation: Activation of the actor and of ``V`` (``tanh``, ``relu`` or ``gelu``;
            the Q critics use ReLU).
        continuous_action: ``clip`` or ``tanh`` (:mod:`rl_core.models.action_heads`).
        init_log_std: Initial log standard deviation of the Gaussian head.
        num_critics: Q critics in the ensemble.
        critic_norm: ``none``, ``layer_norm`` or ``batch_renorm`` after each hidden Q layer.
    """

    model_type = "mlp_iql"
    forward_types = ("default_forward", "value_forward", "q_forward", "v_forward")

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        critic_hidden_sizes: list[int],
        activation: str = "relu",
        continuous_action: str = "clip",
        init_log_std: float = 0.0,
        num_critics: int = 2,
        critic_norm: str = "none",
    ) -> None:
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ValueError(f"mlp_iql needs a 1-D Box action space, got {action_space}")
        if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
            raise ValueError(f"mlp_iql needs finite action bounds, got {action_space}")
        if critic_norm not in CRITIC_NORMS:
            raise ValueError(
                f"critic_norm must be one of {sorted(CRITIC_NORMS)}, got {critic_norm!r}"
            )
        super().__init__(
            obs_dim,
            action_space,
            hidden_sizes,
            activation,
            continuous_action,
            init_log_std,
            critic_hidden_sizes=critic_hidden_sizes,
        )
        self.action_dim = int(action_space.shape[0])
        self.num_critics = num_critics
        self.critics = ensemble_mlp(
            num_critics, [obs_dim + self.action_dim, *critic_hidden_sizes, 1], critic_norm
        )

    def q_forward(
        self,
        states: torch.Tensor,
        actions: torch.Tensor,
        critics: nn.Module | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """Q-values ``[E, B]`` of every critic for observation-action pairs.

        Args:
            states: Observations ``[B, D]``.
            actions: Env actions ``[B, A]`` (rescaled from the bounds to ``[-1, 1]`` here).
            critics: Another ensemble of the same shape to evaluate instead (the learner's
                target critics); default: this policy's critics.
            **kwargs: Ignored (a common signature for every forward type).
        """
        unit = 2.0 * (actions - self.action_low) / (self.action_high - self.action_low) - 1.0
        chosen = self.critics if critics is None else critics
        return ensemble_q_values(chosen, self.num_critics, states, unit)

    def v_forward(self, states: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """The state value ``V(s)`` ``[B]`` of observations ``[B, D]``."""
        return self.critic(states).squeeze(-1)

    def actor_parameters(self) -> list[nn.Parameter]:
        """Parameters of the actor (its MLP and the log-std)."""
        return [*self.actor.parameters(), self.log_std]

    def value_parameters(self) -> list[nn.Parameter]:
        """Parameters of the state-value critic ``V``."""
        return list(self.critic.parameters())

    def critic_parameters(self) -> list[nn.Parameter]:
        """Parameters of the Q-critic ensemble."""
        return list(self.critics.parameters())


def build_mlp_iql(cfg: Any, spaces: Any) -> MLPIQLPolicy:
    """Builder registered as ``mlp_iql``."""
    obs_space = spaces.observation_space
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"mlp_iql needs a Box observation space, got {obs_space}")
    return MLPIQLPolicy(
        obs_dim=int(np.prod(obs_space.shape)),
        action_space=spaces.action_space,
        hidden_sizes=list(cfg.hidden_sizes),
        critic_hidden_sizes=list(cfg.critic_hidden_sizes or cfg.hidden_sizes),
        activation=cfg.activation,
        continuous_action=cfg.continuous_action,
        init_log_std=cfg.init_log_std,
        num_critics=cfg.num_critics,
        critic_norm=cfg.critic_norm,
    )


#: The config checks read the forward types a builder announces (IQL needs ``q_forward``
#: and ``v_forward``).
build_mlp_iql.forward_types = MLPIQLPolicy.forward_types  # type: ignore[attr-defined]
register_model("mlp_iql", build_mlp_iql, category="embodied")
