"""Implicit Q-Learning's losses (Kostrikov, Nair and Levine, 2021), in plain torch.

IQL learns from a fixed dataset of transitions ``(s, a, r, s', d)`` without ever asking
its critics about actions outside the dataset:

- **Value**: ``V(s)`` regresses towards the smallest target Q of the dataset action,
  ``min_i Q̂_i(s, a)``, with the asymmetric *expectile* loss
  ``L_τ(u) = |τ - 1(u < 0)| · u²`` on ``u = min_i Q̂_i(s, a) - V(s)``. With ``τ = 0.5`` it
  is the mean squared error (``V`` is the dataset policy's value); towards ``τ = 1`` it
  approaches the largest Q over the actions the dataset took in ``s``: the value of the best
  behaviour the data contains.
- **Q**: every critic regresses towards ``r + γ (1 - d) V(s')`` (squared error, mean over the
  batch, summed over the critics): the next state's value comes from ``V``, not from an
  action chosen by the policy.
- **Actor**: advantage-weighted regression, ``-exp(β (Q̂ - V)) · log π(a | s)`` with the
  weight clipped to ``max_weight``: behaviour cloning that copies the dataset actions in
  proportion to how much better than ``V`` they are (``β = 0`` is plain behaviour cloning).
- **Target critics** follow the critics by Polyak averaging
  (:func:`rl_core.algorithms.target_networks.polyak_update`).

The functions take and return tensors only; :class:`rl_core.training.iql_update.IQLLearner`
calls them on minibatches.
"""

from __future__ import annotations

import torch


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """Elementwise expectile loss ``|τ - 1(u < 0)| · u²`` of the residuals ``u = diff``.

    Args:
        diff: Residuals ``target - prediction``, any shape.
        expectile: ``τ`` in ``(0, 1)``: positive residuals weigh ``τ``, negative ones
            ``1 - τ``.

    Returns:
        A tensor shaped like ``diff``.

    Raises:
        ValueError: ``expectile`` is not in ``(0, 1)``.
    """
    if not 0.0 < expectile < 1.0:
        raise ValueError(f"expectile must be in (0, 1), got {expectile}")
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff.square()


def iql_value_loss(target_q: torch.Tensor, values: torch.Tensor, expectile: float) -> torch.Tensor:
    """Expectile regression of ``V(s)`` towards the smallest target Q of the dataset action.

    Args:
        target_q: The target critics' ``Q̂_i(s, a)``, ``[E, B]`` (or ``[B]`` for one critic).
        values: ``V(s)``, ``[B]``.
        expectile: ``τ`` (``algorithm.iql.expectile``).

    Returns:
        The scalar loss: the mean over the batch of ``L_τ(min_i Q̂_i(s, a) - V(s))``.
    """
    smallest = target_q.min(dim=0).values if target_q.dim() == 2 else target_q
    return expectile_loss(smallest.detach() - values, expectile).mean()


def iql_td_target(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """The critics' target ``r + γ (1 - d) V(s')`` (no gradient).

    Args:
        rewards: ``[B]`` rewards.
        terminated: ``[B]`` 1 where the episode ended in a terminal state (no bootstrap).
        next_values: ``V(s')``, ``[B]``.
        gamma: Discount factor.
    """
    with torch.no_grad():
        return rewards + gamma * (1.0 - terminated) * next_values


def iql_q_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Squared TD error of every critic: mean over the batch, summed over the critics.

    Args:
        q: The critics' ``Q_i(s, a)``, ``[E, B]``.
        target: :func:`iql_td_target`, ``[B]``.
    """
    return (q - target.detach().unsqueeze(0)).square().mean(dim=1).sum()


def awr_weights(advantages: torch.Tensor, temperature: float, max_weight: float) -> torch.Tensor:
    """Advantage weights ``min(exp(β · A), max_weight)`` (no gradient).

    Args:
        advantages: ``Q̂(s, a) - V(s)``, ``[B]``.
        temperature: ``β`` (``algorithm.iql.temperature``; 0 weighs every action 1).
        max_weight: Largest weight (``algorithm.iql.max_weight``).
    """
    with torch.no_grad():
        return torch.exp(temperature * advantages).clamp(max=max_weight)


def awr_actor_loss(logprobs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The actor's loss ``-mean(w · log π(a | s))`` over the batch.

    Args:
        logprobs: ``log π(a | s)`` of the dataset actions, ``[B]`` (differentiable).
        weights: :func:`awr_weights`, ``[B]``.
    """
    return -(weights.detach() * logprobs).mean()
