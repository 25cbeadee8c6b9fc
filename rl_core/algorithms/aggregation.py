"""Loss aggregation: a ``[B, L]`` matrix of per-token losses → one scalar.

With ``m`` the loss mask (the response mask less the tool output of a multi-turn response,
:mod:`rl_core.training.loss_mask`) and ``L`` the padded length (verl's ``agg_loss``; DAPO,
Yu et al. 2025, §3.3; Dr. GRPO, Liu et al. 2025), ``mean_b`` is the mean over the
*sequences*, the rows with at least one token: a fully masked row (no response token) is
not counted, as in verl, so padding rows never dilute the loss.

* ``token-mean``: ``sum(l * m) / sum(m)`` — every token weighs the same (DAPO).
* ``seq-mean-token-sum``: ``mean_b(sum_t l * m)``.
* ``seq-mean-token-mean``: ``mean_b(sum_t l * m / sum_t m)`` — original GRPO.
* ``seq-mean-token-sum-norm``: ``mean_b(sum_t l * m / norm)`` with ``norm`` a constant
  (default ``L``) — Dr. GRPO's length-unbiased form (Dr. GRPO's code and TRL's ``dr_grpo``
  divide the token sum by ``batch size × max length``; verl's trainer scales its
  micro-batch sums by ``micro / mini-batch size``, the same mean over sequences).

An empty batch (no token at all) aggregates to 0.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_core.registry import Registry, RegistryError

Aggregator = Callable[..., torch.Tensor]
LOSS_AGGREGATIONS: Registry[Aggregator] = Registry("loss aggregation mode")


def count_sequences(mask: torch.Tensor) -> int:
    """Rows of ``mask`` ``[B, L]`` with at least one token: the sequences a seq-mean counts."""
    return int((mask.sum(dim=-1) > 0).sum())


def _seq_mean(seq_losses: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return seq_losses.sum() / max(count_sequences(mask), 1)


@LOSS_AGGREGATIONS.decorator("token-mean")
def _token_mean(loss: torch.Tensor, mask: torch.Tensor, **_: object) -> torch.Tensor:
    return (loss * mask).sum() / mask.sum().clamp(min=1.0)


@LOSS_AGGREGATIONS.decorator("seq-mean-token-sum")
def _seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, **_: object) -> torch.Tensor:
    return _seq_mean((loss * mask).sum(dim=-1), mask)


@LOSS_AGGREGATIONS.decorator("seq-mean-token-mean")
def _seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, **_: object) -> torch.Tensor:
    return _seq_mean((loss * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0), mask)


@LOSS_AGGREGATIONS.decorator("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(
    loss: torch.Tensor, mask: torch.Tensor, norm: float | None = None, **_: object
) -> torch.Tensor:
    return _seq_mean((loss * mask).sum(dim=-1) / float(norm or mask.shape[-1]), mask)


@LOSS_AGGREGATIONS.decorator("weighted-sum")
def _weighted_sum(loss: torch.Tensor, mask: torch.Tensor, **_: object) -> torch.Tensor:
    return (loss * mask).sum()


#: Per-token weights ``w`` with ``aggregate(l) == sum(l * w)`` over a whole (global) batch:
#: ``fn(mask, total_tokens, total_seqs, norm) -> w`` (``total_seqs``: the batch's rows with a
#: token, :func:`count_sequences`). Weighting micro-batches and data-parallel shards by the
#: *global* totals makes the sum of their losses equal the batch's loss.
#: These are the names ``algorithm.loss_agg_mode`` allows.
LOSS_AGG_MODES: Registry[Callable[..., torch.Tensor]] = Registry("loss aggregation mode")
LOSS_AGG_MODES.register("token-mean", lambda m, tokens, seqs, norm: m / max(tokens, 1.0))
LOSS_AGG_MODES.register("seq-mean-token-sum", lambda m, tokens, seqs, norm: m / max(seqs, 1))
LOSS_AGG_MODES.register(
    "seq-mean-token-mean",
    lambda m, tokens, seqs, norm: m / m.sum(dim=-1, keepdim=True).clamp(min=1.0) / max(seqs, 1),
)
LOSS_AGG_MODES.register(
    "seq-mean-token-sum-norm",
    lambda m, tokens, seqs, norm: m / float(norm or m.shape[-1]) / max(seqs, 1),
)


def aggregation_weights(
    mask: torch.Tensor,
    mode: str,
    total_tokens: float,
    total_seqs: int,
    norm: float | None = None,
) -> torch.Tensor:
    """Per-token weights that turn ``mode`` into a plain weighted sum.

    ``aggregate_loss(l, m, mode) == (l * aggregation_weights(m, mode, m.sum(),
    count_sequences(m))).sum()`` for a whole batch; for a part of a batch pass the whole
    batch's ``total_tokens`` (sum of its mask) and ``total_seqs``, and the parts' weighted
    sums add up to the batch's loss.

    Args:
        mask: ``[B, L]`` loss mask of this part (its response mask in a single-turn batch).
        mode: A loss aggregation mode (not ``weighted-sum``).
        total_tokens: Tokens of the mask in the whole batch.
        total_seqs: Responses with at least one token of the mask in the whole batch
            (:func:`count_sequences`; fully masked rows do not count).
        norm: The constant of ``seq-mean-token-sum-norm`` (default: ``L``).
    """
    if mode not in LOSS_AGG_MODES:
        raise ValueError(
            f"unknown loss aggregation {mode!r}; allowed: {', '.join(LOSS_AGG_MODES.names())}"
        )
    weights = LOSS_AGG_MODES.get(mode)
    return weights(mask.float(), float(total_tokens), int(total_seqs), norm)


def aggregate_loss(
    loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean", norm: float | None = None
) -> torch.Tensor:
    """Reduce per-token ``loss`` ``[B, L]`` under ``mask`` ``[B, L]`` with ``mode``.

    Args:
        loss: Per-token losses.
        mask: 1 where a token counts.
        mode: One of ``LOSS_AGGREGATIONS.names()`` (see the module docstring).
        norm: The constant of ``seq-mean-token-sum-norm`` (default: ``L``).

    Raises:
        ValueError: Unknown mode, or ``loss`` and ``mask`` shapes differ.
    """
    if loss.shape != mask.shape:
        raise ValueError(f"loss {tuple(loss.shape)} and mask {tuple(mask.shape)} differ in shape")
    try:
        fn = LOSS_AGGREGATIONS.get(mode)
    except RegistryError:
        raise ValueError(
            f"unknown loss aggregation {mode!r}; allowed: {', '.join(LOSS_AGGREGATIONS.names())}"
        ) from None
    return fn(loss, mask.to(loss.dtype), norm=norm)
