"""Built-in off-policy actor-critic for flat observations and continuous actions.

``mlp_sac``: a tanh-squashed Gaussian actor with a state-dependent standard deviation and
an ensemble of Q critics (plain, LayerNorm or batch-renormalized hidden layers), the model
that the SAC, CrossQ and RLPD trainers train (:mod:`rl_core.training.sac_update`). Besides
the rollout contract it offers the forward types those trainers need:

- ``sac_forward``: reparameterized actions for observations, with their log-probabilities;
- ``q_forward``: the critic ensemble's values ``[E, B]`` of observation-action pairs.

Actions inside the model live in ``[-1, 1]``; :meth:`MLPSACPolicy.predict_action_batch`
rescales them to the env's bounds, and the replay buffer stores the model's ``[-1, 1]``
actions (``forward_inputs["actions"]``).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl_core.models.base_policy import BasePolicy, flat_states, policy_device
from rl_core.models.ensemble_layers import CRITIC_NORMS, ensemble_mlp, ensemble_q_values
from rl_core.models.registry import register_model
from rl_core.models.sampling_noise import standard_normal_like

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class MLPSACPolicy(BasePolicy):
    """Squashed-Gaussian actor plus a Q-critic ensemble over ``env_obs["states"]``.

    Args:
        obs_dim: Flat observation size.
        action_space: A 1-D ``Box`` with finite bounds.
        hidden_sizes: Hidden widths of the actor.
        critic_hidden_sizes: Hidden widths of each critic.
        num_critics: Critics in the ensemble (2 for SAC and CrossQ, 10 for RLPD).
        critic_norm: ``none``, ``layer_norm`` or ``batch_renorm``.
    """

    forward_types = ("default_forward", "sac_forward", "q_forward")

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        critic_hidden_sizes: list[int],
        num_critics: int = 2,
        critic_norm: str = "none",
    ) -> None:
        super().__init__()
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ValueError(f"mlp_sac needs a 1-D Box action space, got {action_space}")
        low, high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"mlp_sac needs finite action bounds, got {action_space}")
        if critic_norm not in CRITIC_NORMS:
            raise ValueError(
                f"critic_norm must be one of {sorted(CRITIC_NORMS)}, got {critic_norm!r}"
            )
        self.action_dim = int(action_space.shape[0])
        self.register_buffer("action_scale", torch.as_tensor((high - low) / 2.0))
        self.register_buffer("action_bias", torch.as_tensor((high + low) / 2.0))
        layers: list[nn.Module] = []
        width = obs_dim
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.actor_body = nn.Sequential(*layers)
        self.actor_mean = nn.Linear(width, self.action_dim)
        self.actor_log_std = nn.Linear(width, self.action_dim)
        self.num_critics = num_critics
        self.critics = ensemble_mlp(
            num_critics, [obs_dim + self.action_dim, *critic_hidden_sizes, 1], critic_norm
        )

    # -- actor ---------------------------------------------------------------------------
    def _mean_log_std(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.actor_body(states)
        log_std = torch.tanh(self.actor_log_std(hidden))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return self.actor_mean(hidden), log_std

    @staticmethod
    def _squashed_logprob(
        pre_tanh: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
    ) -> torch.Tensor:
        gauss = -0.5 * ((pre_tanh - mean) / log_std.exp()) ** 2 - log_std
        gauss = gauss - 0.5 * math.log(2.0 * math.pi)
        # log|d tanh(u)/du| = 2 (log 2 - u - softplus(-2u)), numerically stable
        jacobian = 2.0 * (math.log(2.0) - pre_tanh - nn.functional.softplus(-2.0 * pre_tanh))
        return (gauss - jacobian).sum(-1)

    def sac_forward(
        self,
        states: torch.Tensor,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Reparameterized actions in ``[-1, 1]`` and their log-probabilities.

        Args:
            states: Observations ``[B, D]``.
            generator: Drives the Gaussian noise (reproducible updates).
            **kwargs: Ignored (a common signature for every forward type).

        Returns:
            ``{"actions": [B, A], "logprobs": [B]}`` (differentiable in the actor).
        """
        mean, log_std = self._mean_log_std(states)
        noise = standard_normal_like(mean, generator)
        pre_tanh = mean + log_std.exp() * noise
        return {
            "actions": torch.tanh(pre_tanh),
            "logprobs": self._squashed_logprob(pre_tanh, mean, log_std),
        }

    # -- critics -------------------------------------------------------------------------
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
            actions: Model actions in ``[-1, 1]``, ``[B, A]``.
            critics: Another ensemble of the same shape to evaluate instead (the trainer's
                target critics); default: this policy's critics.
            **kwargs: Ignored (a common signature for every forward type).
        """
        chosen = self.critics if critics is None else critics
        return ensemble_q_values(chosen, self.num_critics, states, actions)

    def critic_parameters(self) -> list[nn.Parameter]:
        """Parameters of the critic ensemble."""
        return list(self.critics.parameters())

    def actor_parameters(self) -> list[nn.Parameter]:
        """Parameters of the actor."""
        return [
            *self.actor_body.parameters(),
            *self.actor_mean.parameters(),
            *self.actor_log_std.parameters(),
        ]

    # -- rollout contract ----------------------------------------------------------------
    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = True,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Sample (``train``) or take the mean action (``eval``), rescaled to the bounds.

        ``prev_values`` is the ensemble's smallest Q of the chosen action when asked for.
        """
        states = flat_states(env_obs, policy_device(self))
        mean, log_std = self._mean_log_std(states)
        if mode == "eval":
            pre_tanh = mean
        else:
            pre_tanh = mean + log_std.exp() * standard_normal_like(mean, generator)
        actions = torch.tanh(pre_tanh)
        values = None
        if compute_values:
            values = self.q_forward(states, actions).min(dim=0).values
        result = {
            "prev_logprobs": self._squashed_logprob(pre_tanh, mean, log_std),
            "prev_values": values,
            "forward_inputs": {"states": states, "actions": actions},
        }
        env_actions = actions * self.action_scale + self.action_bias
        return env_actions.cpu().numpy(), result

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Log-probs of cached ``[-1, 1]`` actions, the smallest Q, and an entropy estimate."""
        states = forward_inputs["states"]
        actions = forward_inputs["actions"].clamp(-1.0 + 1e-6, 1.0 - 1e-6)
        mean, log_std = self._mean_log_std(states)
        pre_tanh = torch.atanh(actions)
        out = {"logprobs": self._squashed_logprob(pre_tanh, mean, log_std)}
        if compute_values:
            out["values"] = self.q_forward(states, actions).min(dim=0).values
        if compute_entropy:
            out["entropy"] = -out["logprobs"]
        return out

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """The smallest Q of the mean action, as a state value ``[B]``."""
        states = flat_states(env_obs, policy_device(self))
        mean, _ = self._mean_log_std(states)
        return self.q_forward(states, torch.tanh(mean)).min(dim=0).values


def build_mlp_sac(cfg: Any, spaces: Any) -> MLPSACPolicy:
    """Builder registered as ``mlp_sac``."""
    obs_space = spaces.observation_space
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"mlp_sac needs a Box observation space, got {obs_space}")
    critic_sizes = cfg.critic_hidden_sizes or cfg.hidden_sizes
    return MLPSACPolicy(
        obs_dim=int(np.prod(obs_space.shape)),
        action_space=spaces.action_space,
        hidden_sizes=list(cfg.hidden_sizes),
        critic_hidden_sizes=list(critic_sizes),
        num_critics=cfg.num_critics,
        critic_norm=cfg.critic_norm,
    )


#: The config checks read the forward types a builder announces (off-policy algorithms need
#: ``sac_forward`` and ``q_forward``).
build_mlp_sac.forward_types = MLPSACPolicy.forward_types  # type: ignore[attr-defined]
register_model("mlp_sac", build_mlp_sac, category="embodied")
