"""Built-in MLP actor-critic for flat observations, discrete or continuous actions."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from rl_core.models.base_policy import BasePolicy, flat_states, policy_device
from rl_core.models.registry import register_model
from rl_core.models.sampling_noise import multinomial_on_device, standard_normal_like

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def _mlp(sizes: list[int], activation: str, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class MLPActorCritic(BasePolicy):
    """Separate actor and critic MLPs over ``env_obs["states"]``.

    Discrete action spaces use a categorical head; Box spaces a diagonal Gaussian with a
    state-independent log-std, whose samples are either clipped to the bounds (``clip``,
    log-prob of the unclipped sample) or squashed with tanh and rescaled (``tanh``, with the
    change-of-variables correction).

    Args:
        obs_dim: Flat observation size.
        action_space: A ``Discrete`` or 1-D ``Box`` gymnasium space.
        hidden_sizes: Widths of the hidden layers.
        activation: ``tanh``, ``relu`` or ``gelu``.
        continuous_action: ``clip`` or ``tanh``.
        init_log_std: Initial log standard deviation of the Gaussian head.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        activation: str = "tanh",
        continuous_action: str = "clip",
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete:
            out_dim = int(action_space.n)
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            out_dim = int(action_space.shape[0])
            low, high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
            self.register_buffer("action_low", torch.as_tensor(low))
            self.register_buffer("action_high", torch.as_tensor(high))
            self.log_std = nn.Parameter(torch.full((out_dim,), float(init_log_std)))
        else:
            raise ValueError(
                f"mlp_actor_critic supports Discrete or 1-D Box action spaces, got {action_space}"
            )
        self.continuous_action = continuous_action
        self.actor = _mlp([obs_dim, *hidden_sizes, out_dim], activation, 0.01)
        self.critic = _mlp([obs_dim, *hidden_sizes, 1], activation, 1.0)

    # -- helpers -------------------------------------------------------------------------
    def _dist(self, states: torch.Tensor) -> Categorical | Normal:
        out = self.actor(states)
        if self.discrete:
            return Categorical(logits=out)
        return Normal(out, self.log_std.exp().expand_as(out))

    def _logprob(self, dist: Categorical | Normal, model_action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return dist.log_prob(model_action)
        logp = dist.log_prob(model_action).sum(-1)
        if self.continuous_action == "tanh":
            # log|d tanh(u)/du| = 2 (log 2 - u - softplus(-2u))
            correction = 2.0 * (
                math.log(2.0) - model_action - nn.functional.softplus(-2 * model_action)
            )
            logp = logp - correction.sum(-1)
        return logp

    def _to_env_action(self, model_action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return model_action
        if self.continuous_action == "tanh":
            unit = torch.tanh(model_action)
            return self.action_low + (unit + 1.0) * 0.5 * (self.action_high - self.action_low)
        return torch.maximum(torch.minimum(model_action, self.action_high), self.action_low)

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
        dist = self._dist(states)
        if mode == "eval":
            model_action = dist.probs.argmax(-1) if self.discrete else dist.mean
        elif self.discrete:
            model_action = multinomial_on_device(dist.probs, generator)
        else:
            noise = standard_normal_like(dist.mean, generator)
            model_action = dist.mean + dist.stddev * noise
        result = {
            "prev_logprobs": self._logprob(dist, model_action),
            "prev_values": self.critic(states).squeeze(-1) if compute_values else None,
            "forward_inputs": {"states": states, "model_action": model_action},
        }
        return self._to_env_action(model_action).cpu().numpy(), result

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Recompute logprobs/values/entropy for cached ``states`` and ``model_action``."""
        states = forward_inputs["states"]
        dist = self._dist(states)
        out = {"logprobs": self._logprob(dist, forward_inputs["model_action"])}
        if compute_values:
            out["values"] = self.critic(states).squeeze(-1)
        if compute_entropy:
            ent = dist.entropy()
            out["entropy"] = ent if self.discrete else ent.sum(-1)
        return out

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B]."""
        return self.critic(flat_states(env_obs, policy_device(self))).squeeze(-1)


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
