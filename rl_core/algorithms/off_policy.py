"""Importance-sampling corrections for off-policy samples, and decoupled PPO.

Samples drawn by a *behaviour* policy (a rollout engine whose numerics differ from the
trainer's, or weights some versions old) are reweighted towards the *target* policy the
loss is about, with the ratio ``r = π_target / π_behaviour`` taken per token or per
sequence (the product of its tokens' ratios):

* ``tis`` (truncated importance sampling): weight ``min(r, C)``.
* ``mis`` (masked importance sampling): weight ``r`` where ``C_low ≤ r ≤ C``, else 0 (the
  token or the whole sequence leaves the loss).

Weights carry no gradient. Corrections are registered by name
(:data:`IS_CORRECTIONS`), like policy losses.

Decoupled PPO (Hilton et al. 2021; AReaL) separates the behaviour policy from the
*proximal* policy the PPO ratio is clipped against: with ``old_logprobs`` the proximal
log-probs (recomputed by the trainer before the update) and ``behaviour_logprobs`` those
the samples were drawn with, the per-token PPO loss is weighted by
``min(π_prox / π_behav, cap)`` (a token-level ``tis`` correction).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_core.algorithms.losses import compute_ppo_policy_loss, masked_mean
from rl_core.algorithms.registry import register_policy_loss
from rl_core.registry import Registry

# exp() of a log-ratio beyond this is numerically useless (as in the PPO loss).
_MAX_LOG_RATIO = 20.0

#: ``(ratio, low, high) -> weight``: how a correction turns ratios into weights.
Correction = Callable[[torch.Tensor, float, float], torch.Tensor]
IS_CORRECTIONS: Registry[Correction] = Registry("importance-sampling correction")
IS_LEVELS = ("token", "sequence")


@IS_CORRECTIONS.decorator("tis")
def truncate(ratio: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Truncated importance sampling: ``min(ratio, high)`` (``low`` is not used)."""
    return ratio.clamp(max=high)


@IS_CORRECTIONS.decorator("mis")
def mask(ratio: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Masked importance sampling: ``ratio`` inside ``[low, high]``, 0 outside."""
    return torch.where((ratio >= low) & (ratio <= high), ratio, torch.zeros_like(ratio))


def log_ratios(
    target_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    level: str,
) -> torch.Tensor:
    """``log(π_target / π_behaviour)`` ``[B, L]``: per token, or per sequence (broadcast).

    ``response_mask`` marks the tokens that count: the batch's loss mask. Tokens it does
    not mark (padding; tool output inside a multi-turn response, whose behaviour log-prob
    is 0) have log-ratio 0 and add nothing to a sequence's sum (its product of ratios).

    Raises:
        ValueError: An unknown ``level``.
    """
    if level not in IS_LEVELS:
        raise ValueError(f"importance-sampling level {level!r}: allowed {', '.join(IS_LEVELS)}")
    per_token = (target_logprobs - behaviour_logprobs) * response_mask.to(target_logprobs.dtype)
    if level == "token":
        return per_token
    return per_token.sum(dim=-1, keepdim=True).expand_as(per_token)


def importance_weights(
    target_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    correction: str,
    level: str = "token",
    threshold: float = 2.0,
    threshold_low: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Importance weights ``[B, L]`` (no gradient) and their statistics.

    Args:
        target_logprobs: Log-probs under the policy the loss is about ``[B, L]``.
        behaviour_logprobs: Log-probs the samples were drawn with ``[B, L]``.
        response_mask: Which tokens count ``[B, L]``: the loss mask (0 on padding and on
            tool output, which no policy sampled).
        correction: A registered correction (``tis``, ``mis``).
        level: ``token`` or ``sequence``.
        threshold: Upper bound ``C`` of the ratio (> 1).
        threshold_low: Lower bound of ``mis`` (default ``1 / threshold``).

    Returns:
        ``(weights, metrics)``: weights are 0 where ``response_mask`` is; metrics (over the
        tokens it marks) ``is_weight_mean``, ``is_clipped_fraction`` (tokens whose weight
        differs from their ratio: truncated or masked) and ``is_log_ratio_abs_mean``.

    Raises:
        ValueError: ``threshold`` ≤ 1 or a lower bound outside ``(0, 1]``.
    """
    if threshold <= 1.0:
        raise ValueError(f"importance-sampling threshold must be > 1, got {threshold}")
    low = 1.0 / threshold if threshold_low is None else threshold_low
    if not 0.0 < low <= 1.0:
        raise ValueError(f"importance-sampling lower threshold must be in (0, 1], got {low}")
    apply = IS_CORRECTIONS.get(correction)
    with torch.no_grad():
        log_ratio = log_ratios(target_logprobs, behaviour_logprobs, response_mask, level)
        ratio = torch.exp(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
        weights = apply(ratio, low, high=threshold) * response_mask.to(ratio.dtype)
        valid = response_mask.bool()
        metrics = {
            "is_weight_mean": float(masked_mean(weights, valid)),
            "is_clipped_fraction": float(masked_mean((weights != ratio).to(ratio.dtype), valid)),
            "is_log_ratio_abs_mean": float(masked_mean(log_ratio.abs(), valid)),
        }
    return weights, metrics


@register_policy_loss("decoupled_ppo")
def compute_decoupled_ppo_loss(
    *,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    behaviour_logprobs: torch.Tensor | None = None,
    behaviour_weight_cap: float = 5.0,
    clip_ratio_c: float | None = None,
    loss_mask: torch.Tensor | None = None,
    loss_agg_mode: str = "token-mean",
    loss_agg_norm: float | None = None,
    **_: object,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Decoupled PPO: the PPO loss against the proximal policy, weighted by π_prox / π_behav.

    Args:
        logprobs: Log-probs under the policy being trained.
        old_logprobs: Log-probs under the proximal policy (the weights before this update,
            recomputed by the trainer).
        advantages: Advantages.
        clip_ratio_low: PPO's lower clip range.
        clip_ratio_high: PPO's upper clip range.
        behaviour_logprobs: Log-probs the samples were drawn with (the rollout engine's).
        behaviour_weight_cap: Largest behaviour weight (> 1; AReaL's
            ``behav_imp_weight_cap``).
        clip_ratio_c: Dual-clip constant, as in ``ppo``.
        loss_mask: Token weights of the aggregation (or a 0/1 mask).
        loss_agg_mode: As in ``ppo``.
        loss_agg_norm: As in ``ppo``.
        **_: Ignored.

    Returns:
        ``(loss, metrics)``: ``ppo``'s metrics plus ``behaviour_weight_mean`` and
        ``behaviour_clipped_fraction``.

    Raises:
        ValueError: No ``behaviour_logprobs``.
    """
    if behaviour_logprobs is None:
        raise ValueError(
            "loss_type 'decoupled_ppo' needs the behaviour policy's log-probs (the rollout "
            "engine's); this trainer passes none"
        )
    valid = torch.ones_like(logprobs) if loss_mask is None else (loss_mask != 0).to(logprobs)
    weights, stats = importance_weights(
        old_logprobs, behaviour_logprobs, valid, "tis", "token", behaviour_weight_cap
    )
    weighted = weights if loss_mask is None else loss_mask * weights
    loss, metrics = compute_ppo_policy_loss(
        logprobs=logprobs,
        old_logprobs=old_logprobs,
        advantages=advantages,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        loss_mask=weighted,
        loss_agg_mode=loss_agg_mode,
        loss_agg_norm=loss_agg_norm,
    )
    metrics["behaviour_weight_mean"] = stats["is_weight_mean"]
    metrics["behaviour_clipped_fraction"] = stats["is_clipped_fraction"]
    return loss, metrics
