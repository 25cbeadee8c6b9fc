"""Advantage estimators of the reasoning (LLM) path.

The LLM trainer calls every estimator with the same keywords (each ignores what it does
not use):

* ``rewards`` ``[B]``: one outcome score per response (after reward shaping);
* ``token_rewards`` ``[B, L]``: per-token rewards (the score on the last response token,
  minus the KL penalty when KL is applied in the reward);
* ``response_mask`` ``[B, L]``: 1 on the response tokens trained on. The trainer passes the
  batch's *loss mask* here: in a multi-turn response the tool output inside it is 0 (see
  :mod:`rl_core.training.loss_mask`), so the mask may have gaps; token-level estimators
  skip those tokens (they are the environment's, not time steps of the model);
* ``values`` ``[B, L]`` or None: critic values (PPO);
* ``group_index`` ``[B]``: the prompt group of each row (:mod:`rl_core.algorithms.groups`);
* ``group_size``, ``gamma``, ``gae_lambda``, ``norm_std``, ``eps``.

Responses to one prompt are the ``group_size`` rows sharing a ``group_index``, wherever they
sit in the batch. An estimator returns ``(advantages, returns)`` either per response
(``[B]``, broadcast over the response's tokens by the trainer) or per token (``[B, L]``),
row ``i`` for row ``i`` of the batch.
"""

from __future__ import annotations

import torch

from rl_core.algorithms.advantages import (
    compute_gae,
    group_relative_advantages,
    normalize_advantages,
)
from rl_core.algorithms.groups import GroupIndex, Groups, scored_group_stats
from rl_core.algorithms.registry import register_advantage


def _groups(
    rewards: torch.Tensor, group_size: int, group_index: GroupIndex | None, name: str
) -> tuple[torch.Tensor, Groups]:
    """``[G, group_size]`` float rewards of each group, and where the groups' rows are."""
    if rewards.dim() != 1 or group_size < 1 or rewards.shape[0] % group_size:
        raise ValueError(
            f"rewards must be 1-D with a length divisible by group_size ({group_size}), got "
            f"shape {tuple(rewards.shape)}"
        )
    layout = Groups.of(group_index, rewards.shape[0], group_size, f"the {name} advantage estimator")
    return layout.matrix(rewards.float()), layout


@register_advantage("dr_grpo")
def compute_dr_grpo_advantages(
    *, rewards: torch.Tensor, group_size: int, group_index: GroupIndex | None = None, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): ``A = r - mean(group)``.

    GRPO without the division by the group std (``grpo`` with ``norm_std=False``).
    """
    return group_relative_advantages(rewards, group_size, group_index, 1e-6, False, "dr_grpo")


@register_advantage("rloo")
def compute_rloo_advantages(
    *, rewards: torch.Tensor, group_size: int, group_index: GroupIndex | None = None, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO (Ahmadian et al. 2024; Kool et al. 2019): leave-one-out baseline.

    ``A_i = r_i - mean_{j != i} r_j = n / (n - 1) * (r_i - mean(group))`` for a group of
    ``n`` responses; a group of one gets 0. Returns ``[B]`` (``returns == advantages``).
    """
    groups, layout = _groups(rewards, group_size, group_index, "rloo")
    with torch.no_grad():
        if torch.isnan(groups).any():  # unscored rows: out of the baselines, advantage 0
            scored, count, mean = scored_group_stats(groups)
            filled = torch.where(scored, groups, torch.zeros_like(groups))
            others = (mean * count - filled) / (count - 1).clamp(min=1)
            keep = scored & (count > 1)
            adv = torch.where(keep, filled - others, torch.zeros_like(groups))
        elif group_size == 1:
            adv = torch.zeros_like(groups)
        else:
            others = (groups.sum(dim=1, keepdim=True) - groups) / (group_size - 1)
            adv = groups - others
        adv = layout.scatter(adv)
    return adv, adv.clone()


def discounted_token_returns(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """``G_t = sum_{k >= t} gamma^(k - t) r_k`` over the tokens ``response_mask`` marks.

    Unmarked tokens (padding, tool output inside a multi-turn response) contribute no reward
    and are no time step: ``k - t`` counts marked tokens only. Their return is 0.
    """
    rewards = token_rewards.float() * response_mask
    marked = response_mask != 0
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype)
    for t in reversed(range(rewards.shape[1])):
        running = torch.where(marked[:, t], rewards[:, t] + gamma * running, running)
        returns[:, t] = running
    return returns * response_mask


@register_advantage("outcome")
def compute_outcome_advantages(
    *, rewards: torch.Tensor, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """The outcome score itself as each response's advantage: ``A = r``.

    For single responses (``group_size: 1``) whose rewards already have a baseline taken
    off (online runs: ``online.baseline``), as RLinf's online runner does. Returns ``[B]``
    advantages and returns (broadcast over the response's tokens by the trainer).
    """
    scores = rewards.float()
    return scores.clone(), scores.clone()


@register_advantage("reinforce_plus_plus")
def compute_reinforce_plus_plus_advantages(
    *,
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262; verl ``reinforce_plus_plus``).

    Per-token discounted return ``G_t`` (the KL penalty, when applied in the reward, is
    part of ``token_rewards``), whitened over all (marked) response tokens of the batch:
    ``A = (G - mean) / (std + eps)``. Returns ``[B, L]`` advantages and the raw ``G``.
    """
    with torch.no_grad():
        mask = response_mask.bool()
        returns = discounted_token_returns(token_rewards, response_mask, gamma)
        adv = normalize_advantages(returns, mask)
    return adv, returns


@register_advantage("reinforce_plus_plus_baseline")
def compute_reinforce_plus_plus_baseline_advantages(
    *,
    rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_size: int,
    group_index: GroupIndex | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++-baseline (Hu 2025; verl ``reinforce_plus_plus_baseline``).

    The group mean is subtracted from each outcome score, the result is broadcast over the
    response's (marked) tokens, then whitened over all of them in the batch.
    Returns ``[B, L]`` advantages and ``[B, L]`` returns (the centred scores).
    """
    groups, layout = _groups(rewards, group_size, group_index, "reinforce_plus_plus_baseline")
    with torch.no_grad():
        if torch.isnan(groups).any():  # unscored rows: out of the group means, centred to 0
            scored, _, mean = scored_group_stats(groups)
            centred = torch.where(scored, groups - mean, torch.zeros_like(groups))
        else:
            centred = groups - groups.mean(dim=1, keepdim=True)
        centred = layout.scatter(centred)
        mask = response_mask.bool()
        token_scores = centred[:, None] * response_mask.float()
        adv = normalize_advantages(token_scores, mask)
    return adv, token_scores


@register_advantage("token_gae")
def compute_token_gae(
    *,
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    gae_lambda: float,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over response tokens for PPO with a critic (Schulman et al. 2016; verl ``gae``).

    Each response is one episode that terminates at its last response token, so the value
    after it is 0 and padding never leaks into the recursion. Computed by
    :func:`~rl_core.algorithms.advantages.compute_gae` on the time-major view.

    Tokens ``response_mask`` does not mark inside a response (tool output of a multi-turn
    trajectory, with the trainer's loss mask) are no time steps: each row's marked tokens
    are packed left, in order, before the recursion and put back after it, so the TD error
    of a model token bootstraps from the value before the *next model token* (whose state
    includes the tool output), and the tool tokens' values never enter.
    Returns ``[B, L]`` advantages and returns (zero where ``response_mask`` is 0).
    """
    if values is None:
        raise ValueError("token_gae needs critic values: use a model with a value head")
    order = pack_left_order(response_mask)
    adv, ret = _contiguous_token_gae(
        token_rewards.gather(1, order),
        values.gather(1, order),
        response_mask.gather(1, order),
        gamma,
        gae_lambda,
    )
    return unpack(adv, order), unpack(ret, order)


def pack_left_order(mask: torch.Tensor) -> torch.Tensor:
    """``[B, L]`` column order moving each row's marked tokens to the front, in order.

    ``x.gather(1, order)`` packs them left (the others follow, in order); :func:`unpack`
    puts them back. For a left-aligned mask the order is the identity.
    """
    unmarked = (mask == 0).to(torch.int8)
    return torch.sort(unmarked, dim=1, stable=True).indices


def unpack(packed: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Inverse of ``x.gather(1, order)`` (see :func:`pack_left_order`)."""
    return torch.empty_like(packed).scatter_(1, order, packed)


def _contiguous_token_gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`compute_token_gae` of rows whose marked tokens are left-aligned."""
    mask = response_mask.float()
    lengths = mask.sum(dim=1).long()
    last = torch.zeros_like(mask, dtype=torch.bool)
    rows = torch.nonzero(lengths > 0).squeeze(-1)
    # the last response token of each row (responses are left-aligned in the response block)
    last_index = torch.tensor(
        [int(torch.nonzero(mask[r]).max()) for r in rows.tolist()], dtype=torch.long
    )
    last[rows, last_index] = True
    adv_t, ret_t = compute_gae(
        rewards=(token_rewards.float() * mask).T,
        values=(values.float() * mask).T,
        terminated=last.T,
        truncated=torch.zeros_like(last.T),
        next_values=torch.zeros(mask.shape[0]),
        gamma=gamma,
        gae_lambda=gae_lambda,
    )
    return adv_t.T * mask, ret_t.T * mask
