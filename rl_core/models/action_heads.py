"""The action distribution and MLP layers shared by the built-in actor-critics (MLP, CNN, VLA).

A policy's actor produces one output vector per observation; :class:`ActionHeadMixin`
turns it into a distribution over env actions:

- ``Discrete`` spaces: a categorical over the logits;
- 1-D ``Box`` spaces: a diagonal Gaussian with a state-independent learned log-std, whose
  samples (the *model actions*) reach the env either clipped to the bounds (``clip``; the
  log-prob is that of the unclipped sample) or squashed with tanh and rescaled to the
  bounds (``tanh``; the log-prob carries the change-of-variables correction).

:meth:`ActionHeadMixin._act` and :meth:`ActionHeadMixin._score` are the steps every
actor-critic's ``predict_action_batch`` and ``default_forward`` share once its actor has
produced that output.

The mixin keeps its parameter and buffers (``log_std``, ``action_low``, ``action_high``) on
the policy itself, so the state-dict keys of a policy do not depend on the mixin.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from rl_core.models.sampling_noise import multinomial_on_device, standard_normal_like

#: ``continuous_action`` choices: clip Gaussian samples to the bounds, or squash with tanh.
CONTINUOUS_ACTIONS = ("clip", "tanh")
#: A demonstrated ``tanh`` action is mapped back through ``atanh`` after clamping its
#: position in the bounds to ``[-1 + eps, 1 - eps]``: a demonstration at a bound (common
#: for scripted experts) becomes a finite pre-squash target (``|u| <= atanh(1 - eps)``,
#: about 4.95) instead of an infinite one.
TANH_DEMO_EPS = 1e-4
#: ``model.activation`` choices of the hidden layers.
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def mlp(sizes: list[int], activation: str, out_gain: float) -> nn.Sequential:
    """Linear layers ``sizes[0] -> ... -> sizes[-1]`` with ``activation`` between them.

    Weights are orthogonal (gain sqrt(2) for hidden layers, ``out_gain`` for the last one)
    and biases zero, initialised in layer order from torch's global generator.

    Args:
        sizes: Input width, hidden widths, output width.
        activation: ``tanh``, ``relu`` or ``gelu``.
        out_gain: Orthogonal gain of the output layer (0.01 for actors, 1 for critics).
    """
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class ActionHeadMixin:
    """Categorical or Gaussian (``clip``/``tanh``) action head for a :class:`BasePolicy`.

    Call :meth:`_init_action_head` in ``__init__`` (after ``nn.Module.__init__``); it
    returns the size of the actor's output.
    """

    discrete: bool
    continuous_action: str
    log_std: nn.Parameter
    action_low: torch.Tensor
    action_high: torch.Tensor

    def _init_action_head(
        self,
        action_space: gym.Space,
        continuous_action: str,
        init_log_std: float,
        model_type: str,
        allow_discrete: bool = True,
    ) -> int:
        """Register the head's parameter and buffers; return the actor's output size.

        Args:
            action_space: A ``Discrete`` or 1-D ``Box`` gymnasium space.
            continuous_action: ``clip`` or ``tanh``.
            init_log_std: Initial log standard deviation of the Gaussian.
            model_type: The model's name in error messages.
            allow_discrete: Whether the model supports ``Discrete`` spaces.

        Raises:
            ValueError: Another action space, or an unknown ``continuous_action``.
        """
        if continuous_action not in CONTINUOUS_ACTIONS:
            raise ValueError(
                f"continuous_action must be one of {CONTINUOUS_ACTIONS}, got {continuous_action!r}"
            )
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete and allow_discrete:
            out_dim = int(action_space.n)
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            out_dim = int(action_space.shape[0])
            low, high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
            module: Any = self
            module.register_buffer("action_low", torch.as_tensor(low))
            module.register_buffer("action_high", torch.as_tensor(high))
            self.log_std = nn.Parameter(torch.full((out_dim,), float(init_log_std)))
        else:
            kinds = "Discrete or 1-D Box" if allow_discrete else "1-D Box"
            raise ValueError(f"{model_type} supports {kinds} action spaces, got {action_space}")
        self.continuous_action = continuous_action
        return out_dim

    def _act(
        self,
        out: torch.Tensor,
        mode: str,
        generator: torch.Generator | None,
        inputs: dict[str, torch.Tensor],
        values: Callable[[], torch.Tensor],
        compute_values: bool = True,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Act on the actor's output: the env actions and ``predict_action_batch``'s result.

        Args:
            out: The actor's output ``[B, out_dim]``.
            mode: ``eval`` (the distribution's mode) or ``train`` (a draw).
            generator: Drives the draw.
            inputs: The forward inputs of the observations (``model_action`` is added).
            values: Computes the critic's values ``[B]``.
            compute_values: Whether to call ``values`` (``prev_values`` is None otherwise).

        Returns:
            Env actions (numpy) and ``{"prev_logprobs", "prev_values", "forward_inputs"}``.
        """
        dist = self._head_dist(out)
        model_action = self._sample_model_action(dist, mode, generator)
        result = {
            "prev_logprobs": self._logprob(dist, model_action),
            "prev_values": values() if compute_values else None,
            "forward_inputs": {**inputs, "model_action": model_action},
        }
        return self._to_env_action(model_action).cpu().numpy(), result

    def _score(
        self,
        out: torch.Tensor,
        model_action: torch.Tensor,
        values: Callable[[], torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
    ) -> dict[str, torch.Tensor]:
        """Score cached model actions under the actor's output: ``default_forward``'s result.

        Args:
            out: The actor's output ``[B, out_dim]``.
            model_action: The model actions to score (``forward_inputs["model_action"]``).
            values: Computes the critic's values ``[B]``.
            compute_values: Whether to add ``values``.
            compute_entropy: Whether to add ``entropy``.

        Returns:
            ``logprobs`` [B], and ``values`` and ``entropy`` [B] when asked for.
        """
        dist = self._head_dist(out)
        scores = {"logprobs": self._logprob(dist, model_action)}
        if compute_values:
            scores["values"] = values()
        if compute_entropy:
            scores["entropy"] = self._entropy(dist)
        return scores

    def _head_dist(self, out: torch.Tensor) -> Categorical | Normal:
        """The action distribution for the actor's output ``out`` [B, out_dim]."""
        if self.discrete:
            return Categorical(logits=out)
        return Normal(out, self.log_std.exp().expand_as(out))

    def _logprob(self, dist: Categorical | Normal, model_action: torch.Tensor) -> torch.Tensor:
        """Log-probability [B] of ``model_action`` (of the env action, for ``tanh``)."""
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

    def _entropy(self, dist: Categorical | Normal) -> torch.Tensor:
        """Entropy [B] of the distribution (of the pre-squash Gaussian, for ``tanh``)."""
        ent = dist.entropy()
        return ent if self.discrete else ent.sum(-1)

    def _sample_model_action(
        self, dist: Categorical | Normal, mode: str, generator: torch.Generator | None
    ) -> torch.Tensor:
        """The mode of ``dist`` (``mode="eval"``) or a draw driven by ``generator``."""
        if mode == "eval":
            return dist.probs.argmax(-1) if self.discrete else dist.mean
        if self.discrete:
            return multinomial_on_device(dist.probs, generator)
        noise = standard_normal_like(dist.mean, generator)
        return dist.mean + dist.stddev * noise

    def _to_env_action(self, model_action: torch.Tensor) -> torch.Tensor:
        """The env action for a model action (clipped, or squashed and rescaled)."""
        if self.discrete:
            return model_action
        if self.continuous_action == "tanh":
            unit = torch.tanh(model_action)
            return self.action_low + (unit + 1.0) * 0.5 * (self.action_high - self.action_low)
        return torch.maximum(torch.minimum(model_action, self.action_high), self.action_low)

    def _from_env_action(self, actions: Any, device: torch.device) -> torch.Tensor:
        """The model action whose log-prob :meth:`_logprob` gives for env ``actions``.

        ``clip``: the action itself; ``tanh``: the inverse squash, with the action's
        position in the bounds clamped to ``[-1 + eps, 1 - eps]`` (:data:`TANH_DEMO_EPS`);
        ``Discrete``: the index as int64.

        Args:
            actions: Env actions ``[B]`` (discrete) or ``[B, out_dim]`` (numpy or tensor).
            device: Where the result goes (the policy's device).
        """
        acts = actions if torch.is_tensor(actions) else torch.tensor(np.asarray(actions))
        if self.discrete:
            return acts.reshape(-1).round().long().to(device)
        acts = acts.to(device=device, dtype=self.action_low.dtype)
        acts = acts.reshape(acts.shape[0], -1)
        if self.continuous_action == "clip":
            return acts
        unit = 2.0 * (acts - self.action_low) / (self.action_high - self.action_low) - 1.0
        return torch.atanh(unit.clamp(-1.0 + TANH_DEMO_EPS, 1.0 - TANH_DEMO_EPS))
