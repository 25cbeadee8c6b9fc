"""One policy update of a causal LM on a batch of scored responses (any data-parallel rank).

Batch layout (tensors, one row per response; see :mod:`rl_core.llm.batching`):
``prompt_ids``/``prompt_mask`` ``[N, P]``, ``response_ids``/``response_mask`` ``[N, R]``,
``old_logprobs``, ``advantages`` ``[N, R]`` and, when used, ``ref_logprobs``,
``old_values``, ``returns`` ``[N, R]``. A batch of scored responses also carries
``group_index`` ``[N]`` (int64, the prompt group of each row), split with the other keys.
A multi-turn batch also carries ``loss_mask`` ``[N, R]`` (0 on tool output appended to the
response): the forward pass attends to every ``response_mask`` token, while every loss
term, statistic and token count weighs the loss mask's tokens only
(:mod:`rl_core.training.loss_mask`; without it, the response mask).

Each minibatch's loss is a weighted sum over tokens whose weights come from the *global*
minibatch (all ranks): its token and response counts (:func:`aggregation_weights`). So
micro-batches (gradient accumulation) and data-parallel ranks (FSDP averages gradients,
hence the ``world_size`` factor) add up to exactly the loss of the whole minibatch, and an
N-worker update equals a single-process one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rl_core.algorithms import (
    aggregation_weights,
    count_sequences,
    get_policy_loss,
    importance_weights,
    kl_penalty,
    value_loss_elements,
)
from rl_core.models.base_policy import BasePolicy
from rl_core.training.loss_mask import check_loss_mask, loss_mask_of
from rl_core.training.micro_batches import MicroBatching, micro_batches
from rl_core.training.nonfinite import SkippedUpdateGuard, all_finite, any_rank
from rl_core.training.optim import clip_gradients
from rl_core.training.rank_balance import balanced_split

FORWARD_KEYS = ("prompt_ids", "prompt_mask", "response_ids", "response_mask")
#: Terms of the minibatch loss reported by :func:`accumulate_minibatch`.
LOSS_TERMS = ("policy_loss", "entropy", "kl_loss", "value_loss")


@dataclass(frozen=True)
class MinibatchTotals:
    """Size of one global minibatch (every rank's part of it).

    Attributes:
        tokens: Trained-on response tokens (sum of the loss mask).
        seqs: Responses with at least one trained-on token; fully masked rows do not count,
            as in the seq-mean loss aggregations (:func:`~rl_core.algorithms.count_sequences`).
    """

    tokens: float
    seqs: int


def split_rows(batch: dict[str, torch.Tensor], parts: int) -> list[dict[str, torch.Tensor]]:
    """Cut a batch into ``parts`` contiguous row ranges (sizes differ by at most one)."""
    n = next(iter(batch.values())).shape[0]
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [
        {k: v[a:b] for k, v in batch.items()}
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    ]


def rank_rows(
    num_rows: int,
    num_minibatches: int,
    world_size: int,
    lengths: Sequence[int] | None = None,
) -> list[list[int]]:
    """Row indices of each data-parallel rank; minibatch ``k`` is the same whatever the ranks.

    The batch is cut into ``num_minibatches`` contiguous chunks and each chunk into
    ``world_size`` parts; rank ``r`` gets part ``r`` of every chunk, in chunk order, so
    :func:`split_rows` of its shard gives back its part of chunk ``k``. With
    ``num_rows`` divisible by ``num_minibatches * world_size`` (checked by the config), an
    N-rank update sees exactly the minibatches of a single-process one.

    Args:
        num_rows: Rows of the batch.
        num_minibatches: Optimizer steps per pass over it.
        world_size: Data-parallel ranks.
        lengths: Tokens of each row: the parts of each chunk are then balanced by tokens
            (:func:`~rl_core.training.rank_balance.balanced_split`) instead of cut in row
            order; the chunks, hence the minibatches, are the same.
    """
    chunks = np.array_split(np.arange(num_rows), num_minibatches)
    ranks: list[list[int]] = [[] for _ in range(world_size)]
    for chunk in chunks:
        if lengths is None:
            parts = [p.tolist() for p in np.array_split(chunk, world_size)]
        else:
            split = balanced_split([lengths[i] for i in chunk], world_size)
            parts = [[int(chunk[i]) for i in part] for part in split]
        for rank, part in enumerate(parts):
            ranks[rank].extend(int(i) for i in part)
    return ranks


def minibatch_totals(
    shards: list[dict[str, torch.Tensor]], num_minibatches: int
) -> list[MinibatchTotals]:
    """Global totals of minibatch ``k`` over the data-parallel shards (computed by the driver).

    Minibatch ``k`` is :func:`split_rows` part ``k`` of every shard (as in :func:`llm_update`),
    so the totals count exactly the rows the ranks weight with them; tokens are those of the
    loss mask (:func:`~rl_core.training.loss_mask.loss_mask_of`).
    """
    totals = []
    for k in range(num_minibatches):
        parts = [loss_mask_of(split_rows(s, num_minibatches)[k]) for s in shards]
        tokens = float(sum(p.sum() for p in parts))
        totals.append(MinibatchTotals(tokens, sum(count_sequences(p) for p in parts)))
    return totals


def supports_packing(policy: torch.nn.Module) -> bool:
    """Whether ``policy``'s ``default_forward`` takes ``packed=True`` (else rows are trimmed)."""
    return bool(getattr(policy, "supports_packing", False))


def _grad_norm(policy: torch.nn.Module, max_norm: float | None) -> float:
    own = getattr(policy, "clip_grad_norm", None)
    if own is not None:  # a trainer that reduces and clips its own gradients (megatron)
        return float(own(max_norm))
    # no clipping is an infinite bound: clip_grad_norm_ still measures sharded gradients whole
    return clip_gradients(policy.parameters(), max_norm if max_norm else math.inf)


def guarded_step(
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: float,
    max_grad_norm: float | None,
    world_size: int,
    guard: SkippedUpdateGuard,
    iteration: int | None,
    where: str,
) -> tuple[bool, float]:
    """Clip the accumulated gradients and step, unless the step is not finite on a rank.

    Every rank agrees on skipping (:func:`~rl_core.training.nonfinite.any_rank`); the
    gradients are dropped either way.

    Args:
        policy: The model whose gradients were accumulated.
        optimizer: Its optimizer.
        loss: This rank's loss of the step.
        max_grad_norm: Gradient clipping norm (None: no clipping).
        world_size: Data-parallel ranks.
        guard: Decides on (and counts) skipped steps.
        iteration: Training iteration, named in the messages about skipped updates.
        where: What the step is, in those messages.

    Returns:
        ``(applied, gradient norm before clipping)``.
    """
    device = next(policy.parameters()).device
    grad_norm = _grad_norm(policy, max_grad_norm)
    nonfinite = any_rank(not all_finite([loss, grad_norm]), device, world_size)
    lr = optimizer.param_groups[0]["lr"]
    applied = guard.allow_step(not nonfinite, iteration, lr, where)
    if applied:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return applied, grad_norm


def accumulate_minibatch(
    policy: BasePolicy,
    minibatch: dict[str, torch.Tensor],
    totals: MinibatchTotals,
    algo: Any,
    batching: MicroBatching | int,
    world_size: int = 1,
    temperature: float = 1.0,
    norm: float | None = None,
) -> dict[str, float]:
    """Forward/backward one minibatch in micro-batches (gradients accumulate; no step).

    Args:
        policy: The policy in train mode.
        minibatch: This rank's rows of the minibatch.
        totals: The global minibatch's totals (every rank's rows).
        algo: The ``algorithm`` config section.
        batching: How the rows are cut into micro-batches (and packed); an int: rows
            per micro-batch.
        world_size: Data-parallel ranks (they agree on the number of micro-batches).
        temperature: Sampling temperature of the responses.
        norm: Constant of ``seq-mean-token-sum-norm``.

    Returns:
        This rank's share of each loss term and of the mean PPO statistics: summed over
        the data-parallel ranks they give the minibatch's values.
    """
    loss_fn = get_policy_loss(algo.loss_type)
    use_values = "returns" in minibatch
    kl_as_loss = algo.kl_coef > 0 and not algo.kl_in_reward
    sums: dict[str, float] = {}
    stats: dict[str, float] = {}
    micro = micro_batches(minibatch, batching, supports_packing(policy), world_size)
    real = sum(not m.filler for m in micro)
    for pass_ in micro:
        part = pass_.inputs
        mask = loss_mask_of(part)  # the forward pass attends to all of response_mask
        weights = aggregation_weights(mask, algo.loss_agg_mode, totals.tokens, totals.seqs, norm)
        weights = weights * (0.0 if pass_.filler else world_size)
        out = policy(  # __call__, not .forward: FSDP2's hooks unshard the root's parameters
            forward_type="default_forward",
            forward_inputs={k: part[k] for k in FORWARD_KEYS},
            compute_values=use_values,
            compute_entropy=True,
            temperature=temperature,
            packed=pass_.packed,
            entropy_grad=algo.entropy_coef != 0,  # a metric only: no graph to keep
        )
        pg_weights, is_stats = _corrected(weights, part, algo)
        pg_loss, pg_stats = loss_fn(
            logprobs=out["logprobs"],
            old_logprobs=part["old_logprobs"],
            advantages=part["advantages"],
            clip_ratio_low=algo.clip_ratio_low,
            clip_ratio_high=algo.clip_ratio_high,
            clip_ratio_c=algo.clip_ratio_c,
            loss_mask=pg_weights,
            loss_agg_mode="weighted-sum",
            behaviour_logprobs=part.get("rollout_logprobs"),
            behaviour_weight_cap=algo.behaviour_weight_cap,
        )
        pg_stats = {**pg_stats, **is_stats}
        entropy = (out["entropy"] * weights).sum()
        loss = pg_loss - algo.entropy_coef * entropy
        terms = {"policy_loss": pg_loss, "entropy": entropy}
        if kl_as_loss:
            kl = (
                kl_penalty(out["logprobs"], part["ref_logprobs"], algo.kl_estimator) * weights
            ).sum()
            loss = loss + algo.kl_coef * kl
            terms["kl_loss"] = kl
        if use_values:
            value_loss = _value_loss(out["values"], part, weights, algo.value_clip)
            loss = loss + algo.value_coef * value_loss
            terms["value_loss"] = value_loss
        loss.backward()
        if pass_.filler:
            continue
        for name, value in terms.items():
            sums[name] = sums.get(name, 0.0) + float(value.detach()) / world_size
        for name, value in pg_stats.items():
            stats[name] = stats.get(name, 0.0) + float(value) / real / world_size
    return {**sums, **stats}


def _corrected(
    weights: torch.Tensor, part: dict[str, torch.Tensor], algo: Any
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token weights of the policy loss times ``algo.is_correction``'s importance weights.

    The ratio is trainer (``old_logprobs``) over rollout engine (``rollout_logprobs``),
    over the loss mask's tokens only: tool tokens (rollout log-prob 0) enter neither a
    sequence's product of ratios nor the statistics.
    """
    if algo.is_correction == "none":
        return weights, {}
    if "rollout_logprobs" not in part:
        raise ValueError(
            f"algorithm.is_correction = {algo.is_correction!r} needs the rollout engine's "
            "log-probs in the batch (rollout_logprobs)"
        )
    is_weights, stats = importance_weights(
        part["old_logprobs"],
        part["rollout_logprobs"],
        loss_mask_of(part),
        algo.is_correction,
        algo.is_level,
        algo.is_threshold,
        algo.is_threshold_low,
    )
    return weights * is_weights, stats


def _value_loss(
    values: torch.Tensor, part: dict[str, torch.Tensor], weights: torch.Tensor, clip: float | None
) -> torch.Tensor:
    """``0.5 * sum(losses * weights)`` of :func:`value_loss_elements` (token weights)."""
    losses, _ = value_loss_elements(values, part["old_values"], part["returns"], clip)
    return 0.5 * (losses * weights).sum()


def llm_update(
    policy: BasePolicy,
    optimizer: torch.optim.Optimizer,
    shard: dict[str, torch.Tensor],
    totals: list[MinibatchTotals],
    algo: Any,
    actor: Any,
    world_size: int = 1,
    temperature: float = 1.0,
    norm: float | None = None,
    *,
    guard: SkippedUpdateGuard | None = None,
    iteration: int | None = None,
) -> dict[str, float]:
    """``actor.update_epochs`` passes over this rank's shard, one optimizer step per minibatch.

    A minibatch whose loss (on any rank) or gradient norm is not finite is skipped on every
    rank: the ranks all-reduce the flag, drop their gradients and leave weights and
    optimizer state as they were. It counts in ``train/skipped_updates`` and not in the
    other metrics.

    Args:
        policy: The (possibly FSDP-sharded) policy, in train mode.
        optimizer: Its optimizer (learning rate already set).
        shard: This rank's rows of the batch (already shuffled by the driver).
        totals: :func:`minibatch_totals` of every minibatch index.
        algo: The ``algorithm`` config section.
        actor: The ``actor`` config section.
        world_size: Data-parallel ranks.
        temperature: Sampling temperature of the responses.
        norm: Constant of ``seq-mean-token-sum-norm``.
        guard: Tracks skipped updates across calls (default: a new one from
            ``actor.max_skipped_updates_in_a_row``).
        iteration: Training iteration, named in the messages about skipped updates.

    Returns:
        Metrics under ``train/`` (this rank's share; the driver adds the ranks' shares).

    Raises:
        SkippedUpdatesError: ``actor.max_skipped_updates_in_a_row`` updates in a row were
            skipped (on every rank at once).
    """
    check_loss_mask(shard)
    if guard is None:
        guard = SkippedUpdateGuard(actor.max_skipped_updates_in_a_row)
    device = next(policy.parameters()).device
    num_minibatches = len(totals)
    sums: dict[str, float] = {}
    steps = skipped = 0
    for epoch in range(actor.update_epochs):
        for k, minibatch in enumerate(split_rows(shard, num_minibatches)):
            metrics = accumulate_minibatch(
                policy,
                minibatch,
                totals[k],
                algo,
                MicroBatching.of(actor),
                world_size,
                temperature,
                norm,
            )
            metrics["grad_norm"] = _grad_norm(policy, actor.max_grad_norm) / world_size
            checked = [metrics[t] for t in (*LOSS_TERMS, "grad_norm") if t in metrics]
            nonfinite = any_rank(not all_finite(checked), device, world_size)
            where = f"epoch {epoch + 1}, minibatch {k + 1}"
            lr = optimizer.param_groups[0]["lr"]
            if not guard.allow_step(not nonfinite, iteration, lr, where):
                optimizer.zero_grad(set_to_none=True)
                skipped += 1
                continue
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            for name, value in metrics.items():
                sums[name] = sums.get(name, 0.0) + value
            steps += 1
    out = {f"train/{k}": v / max(steps, 1) for k, v in sums.items()}
    out["train/optimizer_steps"] = float(steps) / world_size
    out["train/skipped_updates"] = float(skipped) / world_size
    return out
