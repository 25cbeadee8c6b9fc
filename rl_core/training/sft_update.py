"""One supervised step of a causal LM: the negative log-likelihood of the answer tokens.

The SFT warm start (``flows/sft.py``) trains with it, on the same trainer ranks, micro-batches
(:mod:`rl_core.training.micro_batches`) and skip-on-non-finite guard as the RL update
(:mod:`rl_core.training.llm_update`).
"""

from __future__ import annotations

import torch

from rl_core.algorithms import aggregation_weights
from rl_core.models.base_policy import BasePolicy
from rl_core.training.llm_update import (
    FORWARD_KEYS,
    MinibatchTotals,
    guarded_step,
    supports_packing,
)
from rl_core.training.loss_mask import check_loss_mask, loss_mask_of
from rl_core.training.micro_batches import MicroBatching, micro_batches
from rl_core.training.nonfinite import SkippedUpdateGuard


def sft_update(
    policy: BasePolicy,
    optimizer: torch.optim.Optimizer,
    shard: dict[str, torch.Tensor],
    totals: MinibatchTotals,
    batching: MicroBatching | int,
    max_grad_norm: float | None,
    world_size: int = 1,
    *,
    guard: SkippedUpdateGuard | None = None,
    iteration: int | None = None,
) -> dict[str, float]:
    """One supervised step: mean negative log-likelihood of the response (answer) tokens.

    ``shard`` holds ``prompt_*`` and ``response_*`` (the target answer) rows, and optionally
    a ``loss_mask``: the loss is the token mean over the global batch's loss-mask tokens
    (``totals``), so ranks and micro-batches add up to it, and tool output inside a
    tool-use trace is context, never a target.
    A step whose loss or gradient norm is not finite (on any rank) is skipped on every rank,
    as in :func:`llm_update`.

    Args:
        policy: The (possibly FSDP-sharded) policy, in train mode.
        optimizer: Its optimizer (learning rate already set).
        shard: This rank's rows.
        totals: Trained-on tokens (loss mask) and sequences of the global batch.
        batching: How the rows are cut into micro-batches (and packed); an int: rows
            per micro-batch.
        max_grad_norm: Gradient clipping norm (None: no clipping).
        world_size: Data-parallel ranks.
        guard: Tracks skipped updates across calls (default: one that stops at the first).
        iteration: Training iteration, named in the messages about skipped updates.

    Returns:
        ``train/sft_loss`` (this rank's share), ``train/grad_norm`` and
        ``train/skipped_updates`` (divided by ranks).

    Raises:
        SkippedUpdatesError: The guard's limit of skipped updates in a row was reached.
    """
    check_loss_mask(shard)
    guard = guard or SkippedUpdateGuard(1)
    loss_sum = 0.0
    for pass_ in micro_batches(shard, batching, supports_packing(policy), world_size):
        part = pass_.inputs
        weights = aggregation_weights(loss_mask_of(part), "token-mean", totals.tokens, totals.seqs)
        out = policy(
            forward_type="default_forward",
            forward_inputs={k: part[k] for k in FORWARD_KEYS},
            compute_values=False,
            compute_entropy=False,
            packed=pass_.packed,
        )
        scale = 0.0 if pass_.filler else world_size
        loss = -(out["logprobs"] * weights * scale).sum()
        loss.backward()
        loss_sum += float(loss.detach()) / world_size
    applied, grad_norm = guarded_step(
        policy, optimizer, loss_sum, max_grad_norm, world_size, guard, iteration, "supervised step"
    )
    return {
        "train/sft_loss": loss_sum if applied else 0.0,
        "train/grad_norm": grad_norm / world_size if applied else 0.0,
        "train/skipped_updates": 0.0 if applied else 1.0 / world_size,
    }
