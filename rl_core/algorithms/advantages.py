"""Advantage estimators (registered) and advantage normalisation.

Step-wise tensors are time-major: ``[T, N]`` for ``T`` steps of ``N`` parallel envs.
Estimators run under ``torch.no_grad()``: advantages and returns are training targets.
"""

from __future__ import annotations

import torch

from rl_core.algorithms.groups import GroupIndex, Groups, scored_group_stats
from rl_core.algorithms.registry import register_advantage


def _check_shape(name: str, tensor: torch.Tensor, shape: torch.Size) -> None:
    if tensor.shape != shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")


@register_advantage("gae")
def compute_gae(
    *,
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    next_values: torch.Tensor,
    final_values: torch.Tensor | None = None,
    gamma: float,
    gae_lambda: float,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation with correct terminated/truncated handling.

    For each step ``t`` (per env), with ``V`` the value function:

    * ``terminated[t]``: ``delta = r_t - V(s_t)``; no bootstrap, and the recursion stops.
    * ``truncated[t]`` (and not terminated): ``delta = r_t + gamma * final_values[t] - V(s_t)``;
      the recursion stops too, since row ``t + 1`` starts a new episode.
    * otherwise: ``delta = r_t + gamma * V(s_{t+1}) - V(s_t)`` with ``V(s_{t+1})`` taken from
      ``values[t + 1]``, or from ``next_values`` at ``t = T - 1``, and
      ``A_t = delta + gamma * gae_lambda * A_{t+1}``.

    Args:
        rewards: ``[T, N]`` rewards ``r_t``.
        values: ``[T, N]`` value estimates ``V(s_t)``.
        terminated: ``[T, N]`` bool/0-1, the episode ended in a terminal state at step ``t``.
        truncated: ``[T, N]`` bool/0-1, the episode was cut off (time limit) at step ``t``.
        next_values: ``[N]`` value ``V(s_T)`` of the observation after the last step.
        final_values: ``[T, N]`` value of the final observation of the episode that was
            truncated at step ``t``; read only where ``truncated`` is set (other entries are
            ignored). May be omitted only if nothing is truncated.
        gamma: Discount factor.
        gae_lambda: GAE ``lambda``.
        **_: Ignored, so every estimator can be called with the same keywords.

    Returns:
        ``(advantages, returns)``, both ``[T, N]`` in the dtype of ``values``, with
        ``returns = advantages + values``.

    Raises:
        ValueError: Shapes disagree, or something is truncated but ``final_values`` is None.
    """
    if values.dim() != 2:
        raise ValueError(f"values must be [T, N], got shape {tuple(values.shape)}")
    shape = values.shape
    for name, tensor in (
        ("rewards", rewards),
        ("terminated", terminated),
        ("truncated", truncated),
    ):
        _check_shape(name, tensor, shape)
    _check_shape("next_values", next_values, shape[1:])
    term = terminated.bool()
    trunc = truncated.bool() & ~term
    if final_values is None:
        if bool(trunc.any()):
            raise ValueError("final_values is required when any step is truncated")
        final_values = torch.zeros_like(values)
    _check_shape("final_values", final_values, shape)

    with torch.no_grad():
        dtype = values.dtype
        rewards, final_values = rewards.to(dtype), final_values.to(dtype)
        next_values = next_values.to(dtype)
        zeros = torch.zeros_like(next_values)
        advantages = torch.zeros_like(values)
        last = zeros
        for t in reversed(range(shape[0])):
            v_next = values[t + 1] if t + 1 < shape[0] else next_values
            bootstrap = torch.where(term[t], zeros, torch.where(trunc[t], final_values[t], v_next))
            delta = rewards[t] + gamma * bootstrap - values[t]
            carry = torch.where(term[t] | trunc[t], zeros, last)
            last = delta + gamma * gae_lambda * carry
            advantages[t] = last
        returns = advantages + values
    return advantages, returns


@register_advantage("grpo")
def compute_group_advantages(
    *,
    rewards: torch.Tensor,
    group_size: int,
    group_index: GroupIndex | None = None,
    eps: float = 1e-6,
    norm_std: bool = True,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-relative (GRPO) outcome advantages.

    Entries of ``rewards`` with the same ``group_index`` are responses to the same prompt (or
    episodes from the same start), wherever they sit in the batch. Each score is compared with
    its group: ``A = (r - mean) / (std + eps)``, where ``std`` is the *unbiased* sample
    standard deviation (``torch.std`` default, as in the GRPO reference implementations such
    as verl). With ``norm_std=False`` the advantage is ``r - mean`` (Dr. GRPO). A group of
    size 1 gets advantage 0.

    Args:
        rewards: 1-D tensor of ``B`` scalar scores, ``B`` divisible by ``group_size``.
        group_size: Number of entries forming one group.
        group_index: ``[B]`` integers, the group of each entry
            (:mod:`rl_core.algorithms.groups`); each group must have ``group_size`` entries.
        eps: Added to the group std before dividing.
        norm_std: Divide by the group std (GRPO) or not (Dr. GRPO).
        **_: Ignored, so every estimator can be called with the same keywords.

    Returns:
        ``(advantages, returns)``, both ``[B]`` floating tensors, row ``i`` for entry ``i``.
        There is no value function, so ``returns`` equals ``advantages`` (as in verl).

    Raises:
        ValueError: ``rewards`` is not 1-D, ``group_size < 1``, or ``B % group_size != 0``.
        GroupIndexError: ``group_index`` is missing or a group has the wrong size.
    """
    return group_relative_advantages(rewards, group_size, group_index, eps, norm_std, "grpo")


@register_advantage("episode_grpo")
def compute_episode_group_advantages(
    *,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    group_size: int,
    eps: float = 1e-6,
    norm_std: bool = True,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO over whole episodes of envs that share their reset seed (RLinf's VLA recipe).

    The batch's ``[T, N]`` columns hold one episode each: every env's episode ends at the
    last step ``T-1`` and no sooner (episodes of a fixed length, ``rollout.num_steps``).
    Consecutive columns of ``group_size`` envs started from the same state; each episode's
    return is compared with its group's (``(R - mean) / (std + eps)``, as :func:`compute_group_advantages`)
    and every step of the episode takes that advantage. The envs then reset together,
    so the next rollout's groups again start from one state each.

    Args:
        rewards: ``[T, N]`` per-step rewards.
        terminated: ``[T, N]`` episode ends.
        truncated: ``[T, N]`` time limits.
        group_size: Consecutive columns forming a group (``env.group_size``).
        eps: Added to the group std before dividing.
        norm_std: Divide by the group std.
        **_: Ignored (the estimators share their keywords).

    Returns:
        ``(advantages, returns)``, ``[T, N]``; ``returns`` equals ``advantages`` (no critic).

    Raises:
        ValueError: An episode ended before the last step, or did not end at it.
    """
    done = (terminated | truncated).bool()
    early = done[:-1].any(dim=0)
    if early.any() or not done[-1].all():
        env = int(torch.nonzero(early | ~done[-1])[0, 0])
        raise ValueError(
            f"algorithm.adv_type = 'episode_grpo' needs every env to play exactly one episode "
            f"per rollout, ending at its last step; env {env} did not (set "
            "rollout.num_steps to the episode length, env.max_episode_steps, and turn off "
            "termination on success)"
        )
    envs = rewards.shape[1]
    consecutive = torch.arange(envs, device=rewards.device) // group_size  # env.group_size
    per_episode, _ = group_relative_advantages(
        rewards.sum(dim=0), group_size, consecutive, eps, norm_std, "episode_grpo"
    )
    advantages = per_episode.unsqueeze(0).expand_as(rewards).clone()
    return advantages, advantages.clone()


def group_relative_advantages(
    rewards: torch.Tensor,
    group_size: int,
    group_index: GroupIndex | None,
    eps: float,
    norm_std: bool,
    estimator: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`compute_group_advantages` for the estimator named ``estimator`` (in errors)."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(rewards.shape)}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    batch = rewards.shape[0]
    if batch % group_size != 0:
        raise ValueError(
            f"number of rewards ({batch}) is not divisible by group_size ({group_size}); "
            "each group must hold group_size entries"
        )
    layout = Groups.of(group_index, batch, group_size, f"the {estimator} advantage estimator")
    with torch.no_grad():
        scores = rewards if rewards.is_floating_point() else rewards.float()
        groups = layout.matrix(scores)
        if torch.isnan(groups).any():  # unscored rows: out of their groups' statistics
            return _partly_scored_group_advantages(layout, groups, eps, norm_std)
        advantages = groups - groups.mean(dim=1, keepdim=True)
        if norm_std:
            if group_size > 1:
                std = groups.std(dim=1, keepdim=True)
            else:
                std = torch.zeros_like(advantages)
            advantages = advantages / (std + eps)
        advantages = layout.scatter(advantages)
    return advantages, advantages.clone()


def _partly_scored_group_advantages(
    layout: Groups, groups: torch.Tensor, eps: float, norm_std: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-relative advantages when some scores are NaN (unscored rows get 0)."""
    scored, count, mean = scored_group_stats(groups)
    deviation = torch.where(scored, groups - mean, torch.zeros_like(groups))
    advantages = deviation
    if norm_std:
        variance = (deviation**2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
        std = torch.where(count > 1, variance.sqrt(), torch.zeros_like(variance))
        advantages = deviation / (std + eps)
    advantages = layout.scatter(torch.where(scored, advantages, torch.zeros_like(advantages)))
    return advantages, advantages.clone()


def normalize_advantages(
    adv: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8
) -> torch.Tensor:
    """Standardise advantages to zero mean and unit std over the valid elements.

    The mean and (unbiased) std are taken over elements where ``mask`` is set, or over all
    elements when ``mask`` is None. Invalid elements are set to 0 in the result.

    Args:
        adv: Advantages of any shape.
        mask: Optional bool/0-1 tensor broadcastable to ``adv``; True marks valid elements.
        eps: Added to the std before dividing.

    Returns:
        Tensor shaped like ``adv``: ``(adv - mean) / (std + eps)`` on valid elements.
    """
    if mask is None:
        valid = adv.reshape(-1)
    else:
        bool_mask = torch.broadcast_to(mask.bool(), adv.shape)
        valid = adv[bool_mask]
    if valid.numel() == 0:
        return torch.zeros_like(adv)
    mean = valid.mean()
    std = valid.std() if valid.numel() > 1 else torch.zeros_like(mean)
    out = (adv - mean) / (std + eps)
    if mask is not None:
        out = torch.where(bool_mask, out, torch.zeros_like(out))
    return out
