"""The advantage step of LLM training as one pure function.

Outcome scores become token rewards on each response's last trained-on token; an optional
KL penalty to the reference model is measured (and subtracted from the token rewards when
``algorithm.kl_in_reward``); the configured estimator gives advantages (and returns), which
are broadcast over tokens and optionally normalized.

Everything here weighs the *loss mask*'s tokens (:mod:`rl_core.training.loss_mask`): tool
output inside a multi-turn response gets no reward, KL, advantage or return, counts in no
normalization, and is no time step of the token-level estimators (it is passed to them as
their ``response_mask``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl_core.algorithms import get_advantage, kl_penalty, normalize_advantages
from rl_core.algorithms.groups import GroupIndex
from rl_core.training.loss_mask import check_masks


@dataclass
class LLMAdvantages:
    """Result of :func:`compute_llm_advantages`.

    Attributes:
        advantages: ``[B, T]`` per-token advantages (zero on padding and tool tokens).
        returns: ``[B, T]`` value targets (critic estimators), else the estimator's returns.
        metrics: ``rollout/kl_to_ref`` (with a reference model) and ``train/advantage_mean``.
    """

    advantages: torch.Tensor
    returns: torch.Tensor
    metrics: dict[str, float]


def outcome_token_rewards(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` rewards: each response's score on its last token (none for empty rows).

    ``response_mask`` may have gaps (a loss mask, 0 on tool tokens): the score goes on the
    last token it marks, the model's last action.
    """
    token_rewards = torch.zeros_like(response_mask, dtype=torch.float32)
    marked = response_mask != 0
    columns = torch.arange(1, marked.shape[1] + 1, device=marked.device)
    last = (marked * columns).argmax(dim=1)  # the marked column with the largest index
    rows = torch.nonzero(marked.any(dim=1)).squeeze(-1)
    token_rewards[rows, last[rows]] = scores[rows].float()
    return token_rewards


def compute_llm_advantages(
    scores: torch.Tensor,
    response_mask: torch.Tensor,
    old_logprobs: torch.Tensor,
    algo: Any,
    values: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    group_index: GroupIndex | None = None,
    loss_mask: torch.Tensor | None = None,
) -> LLMAdvantages:
    """Advantages of a batch of scored responses.

    Args:
        scores: ``[B]`` outcome rewards.
        response_mask: ``[B, T]`` 1 on response tokens.
        old_logprobs: ``[B, T]`` trainer log-probs of the responses.
        algo: The ``algorithm`` config section.
        values: ``[B, T]`` critic values (``token_gae``), else None.
        ref_logprobs: ``[B, T]`` reference-model log-probs (KL), else None.
        group_index: ``[B]`` the prompt group of each row; the group-relative estimators
            (``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_plus_plus_baseline``) need it.
        loss_mask: ``[B, T]`` 1 on the tokens the model produced, 0 on tool output (and
            padding); None: ``response_mask``.

    A NaN score marks a row nobody could score (a tool's infrastructure failure after its
    retries): it gets no reward, advantage or KL, counts in no normalization, and the group
    estimators leave it out of its group's statistics. The caller gives it loss mask 0 in
    the update too (:func:`unscored_loss_mask`).

    Raises:
        ValueError: ``loss_mask`` does not fit ``response_mask``
            (:func:`~rl_core.training.loss_mask.check_masks`).
        GroupIndexError: A group-relative estimator without a group index that fits the
            batch (``group_size`` rows in every group).
    """
    if loss_mask is not None:
        check_masks(loss_mask, response_mask)
    mask = (response_mask if loss_mask is None else loss_mask).float()
    mask = mask * torch.isfinite(scores.float())[:, None]  # unscored rows: trained on nowhere
    token_rewards = outcome_token_rewards(scores, mask)
    metrics: dict[str, float] = {}
    if ref_logprobs is not None:
        kl = kl_penalty(old_logprobs, ref_logprobs, algo.kl_estimator) * mask
        metrics["rollout/kl_to_ref"] = float(kl.sum() / mask.sum().clamp(min=1))
        if algo.kl_in_reward:
            token_rewards = token_rewards - algo.kl_coef * kl
    adv, ret = get_advantage(algo.adv_type)(
        rewards=scores,
        token_rewards=token_rewards,
        response_mask=mask,
        values=values,
        group_index=group_index,
        group_size=algo.group_size,
        gamma=algo.gamma,
        gae_lambda=algo.gae_lambda,
    )
    if adv.dim() == 1:
        adv, ret = adv[:, None] * mask, ret[:, None] * mask
    if algo.normalize_advantages:
        adv = normalize_advantages(adv, mask.bool())
    valid = mask.bool()
    metrics["train/advantage_mean"] = float(adv[valid].mean()) if valid.any() else 0.0
    return LLMAdvantages(adv, ret, metrics)


def unscored_loss_mask(scores: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """``loss_mask`` with the rows of NaN (unscored) scores zeroed: no gradient reaches them."""
    return loss_mask * torch.isfinite(scores.float())[:, None].to(loss_mask.dtype)
