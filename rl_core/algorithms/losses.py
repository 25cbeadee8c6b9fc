"""Policy losses (registered) and the clipped value loss.

All reductions are masked means: ``loss_mask`` (bool or 0/1, broadcastable to the inputs)
marks the elements that count, e.g. the trained-on response tokens of an LLM batch (its
loss mask: no tool output) or valid env steps.
Metrics are returned as Python floats.
"""

from __future__ import annotations

import torch

from rl_core.algorithms.aggregation import aggregate_loss
from rl_core.algorithms.registry import register_policy_loss

# exp() of a log-ratio beyond this is numerically useless; verl clamps at the same bound.
_MAX_LOG_RATIO = 20.0


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of ``x`` over elements where ``mask`` is set.

    Args:
        x: Values of any shape.
        mask: Optional bool/0-1 tensor broadcastable to ``x``; None means all elements.

    Returns:
        Scalar tensor; 0 when the mask selects nothing.
    """
    if mask is None:
        return x.mean()
    weights = torch.broadcast_to(mask.to(x.dtype), x.shape)
    return (x * weights).sum() / weights.sum().clamp(min=1.0)


def _as_float(x: torch.Tensor) -> float:
    return float(x.detach().item())


@register_policy_loss("ppo")
def compute_ppo_policy_loss(
    *,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None = None,
    loss_mask: torch.Tensor | None = None,
    loss_agg_mode: str = "token-mean",
    loss_agg_norm: float | None = None,
    **_: object,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate loss with asymmetric clipping and optional dual clip.

    With ``ratio = exp(logprobs - old_logprobs)``::

        pg1 = -A * ratio
        pg2 = -A * clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
        loss_t = max(pg1, pg2)
        # dual clip (Ye et al. 2020), only where A < 0:
        loss_t = min(loss_t, -A * clip_ratio_c)

    The log-ratio is clamped to ``[-20, 20]`` before ``exp`` for numerical safety.

    Args:
        logprobs: Log-probabilities of the taken actions under the current policy.
        old_logprobs: Log-probabilities under the policy that collected the data.
        advantages: Advantages, same shape as ``logprobs`` (or broadcastable to it).
        clip_ratio_low: Lower clip range ``eps_low`` (ratio floor ``1 - eps_low``).
        clip_ratio_high: Upper clip range ``eps_high`` (ratio ceiling ``1 + eps_high``).
        clip_ratio_c: Dual-clip constant (> 1), or None to disable dual clipping.
        loss_mask: Optional bool/0-1 mask of the elements that count.
        loss_agg_mode: How per-token losses ``[B, L]`` reduce to a scalar when a
            ``loss_mask`` is given (see :mod:`rl_core.algorithms.aggregation`);
            ``token-mean`` is the masked mean. Without a mask: the plain mean.
        loss_agg_norm: The constant of ``seq-mean-token-sum-norm``.
        **_: Ignored, so every policy loss can be called with the same keywords.

    Returns:
        ``(loss, metrics)``: the scalar aggregated loss, and floats ``clipfrac`` (fraction
        where ``pg2 > pg1``), ``dual_clipfrac``, ``approx_kl`` (masked mean of
        ``old_logprobs - logprobs``, the k1 estimator) and ``ratio_mean``.

    Raises:
        ValueError: ``clip_ratio_c`` is not greater than 1, or a clip range is negative.
    """
    if clip_ratio_low < 0 or clip_ratio_high < 0:
        raise ValueError(
            f"clip ratios must be >= 0, got low={clip_ratio_low}, high={clip_ratio_high}"
        )
    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for dual clipping, got {clip_ratio_c}")

    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(torch.clamp(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    clipped = torch.maximum(pg1, pg2)
    clipfrac = masked_mean((pg2 > pg1).to(ratio.dtype), loss_mask)

    if clip_ratio_c is not None:
        pg3 = -advantages * clip_ratio_c
        negative = advantages < 0
        losses = torch.where(negative, torch.minimum(clipped, pg3), clipped)
        dual_clipfrac = masked_mean(((clipped > pg3) & negative).to(ratio.dtype), loss_mask)
    else:
        losses = clipped
        dual_clipfrac = torch.zeros((), dtype=ratio.dtype)

    if loss_mask is None:
        loss = losses.mean()
    else:
        mask = torch.broadcast_to(loss_mask, losses.shape)
        loss = aggregate_loss(losses, mask, loss_agg_mode, norm=loss_agg_norm)
    with torch.no_grad():
        metrics = {
            "clipfrac": _as_float(clipfrac),
            "dual_clipfrac": _as_float(dual_clipfrac),
            "approx_kl": _as_float(masked_mean(-log_ratio, loss_mask)),
            "ratio_mean": _as_float(masked_mean(ratio, loss_mask)),
        }
    return loss, metrics


def value_loss_elements(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    value_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-element squared errors of the value loss, before its ``0.5`` and its reduction.

    Without clipping: ``(v - R)^2``. With ``value_clip = c``::

        v_clipped = old_v + clamp(v - old_v, -c, c)
        losses = max((v - R)^2, (v_clipped - R)^2)

    Both value losses reduce these: :func:`compute_value_loss` (masked mean) and
    :mod:`rl_core.training.llm_update` (sum weighted by token weights).

    Args:
        values: Current value predictions.
        old_values: Value predictions at collection time (same shape).
        returns: Value targets (same shape).
        value_clip: Clip range ``c``, or None for the plain squared error.

    Returns:
        ``(losses, unclipped)``: the per-element losses and ``(v - R)^2`` (the same tensor
        without clipping); ``losses > unclipped`` where the clipped branch is strictly larger.
    """
    unclipped = (values - returns) ** 2
    if value_clip is None:
        return unclipped, unclipped
    v_clipped = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
    return torch.maximum(unclipped, (v_clipped - returns) ** 2), unclipped


def compute_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    value_clip: float | None = None,
    loss_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Squared-error value loss with optional PPO-style value clipping.

    ``0.5 * masked_mean(losses)`` of :func:`value_loss_elements`: without clipping
    ``0.5 * mean((v - R)^2)``, with ``value_clip = c``
    ``0.5 * mean(max((v - R)^2, (v_clipped - R)^2))``.

    Args:
        values: Current value predictions.
        old_values: Value predictions at collection time (same shape).
        returns: Value targets (same shape).
        value_clip: Clip range ``c`` (> 0), or None for the plain squared error.
        loss_mask: Optional bool/0-1 mask of the elements that count.

    Returns:
        ``(loss, metrics)``: the scalar loss and ``{"value_clipfrac": float}``, the fraction of
        elements where the clipped branch is strictly larger (0.0 without clipping).

    Raises:
        ValueError: ``value_clip`` is not positive.
    """
    if value_clip is not None and value_clip <= 0:
        raise ValueError(f"value_clip must be > 0, got {value_clip}")
    losses, unclipped = value_loss_elements(values, old_values, returns, value_clip)
    clipfrac = 0.0
    if value_clip is not None:
        clipfrac = _as_float(masked_mean((losses > unclipped).to(values.dtype), loss_mask))
    loss = 0.5 * masked_mean(losses, loss_mask)
    return loss, {"value_clipfrac": clipfrac}
