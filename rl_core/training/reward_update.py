"""Reward-model training: the Bradley-Terry loss and one optimizer step on preference pairs.

A reward model gives a scalar ``r(prompt, response)``. Trained on pairs where a response
was preferred to another (``chosen`` over ``rejected``), the Bradley-Terry model says
``P(chosen > rejected) = sigmoid(r_chosen - r_rejected)``; its negative log-likelihood,
averaged over pairs, is the loss.

Batch layout (tensors, one row per pair): ``chosen_ids``/``chosen_mask`` and
``rejected_ids``/``rejected_mask`` ``[N, L]``, right-padded to one length ``L`` so the
chosen and rejected rows of a micro-batch go through the model in one forward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rl_core.models.base_policy import BasePolicy
from rl_core.training.llm_update import guarded_step, split_rows
from rl_core.training.nonfinite import SkippedUpdateGuard

#: Keys of a batch of tokenized preference pairs.
PAIR_KEYS = ("chosen_ids", "chosen_mask", "rejected_ids", "rejected_mask")


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Mean of ``-log sigmoid(r_chosen - r_rejected)`` over the pairs.

    Args:
        chosen: Rewards of the chosen responses, ``[N]``.
        rejected: Rewards of the rejected responses, ``[N]``.

    Returns:
        The scalar loss (``log 2`` when every margin is 0).
    """
    return -F.logsigmoid(chosen - rejected).mean()


def pairwise_accuracy(chosen: torch.Tensor, rejected: torch.Tensor) -> float:
    """Fraction of pairs whose chosen response scores strictly higher (0.0 for no pairs)."""
    if chosen.numel() == 0:
        return 0.0
    return float((chosen > rejected).float().mean())


def reward_margin(chosen: torch.Tensor, rejected: torch.Tensor) -> float:
    """Mean ``r_chosen - r_rejected`` over the pairs (0.0 for no pairs)."""
    if chosen.numel() == 0:
        return 0.0
    return float((chosen - rejected).float().mean())


def pair_rewards(policy: BasePolicy, pairs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Rewards of the chosen and rejected rows of ``pairs``, in one forward pass.

    Returns:
        ``(chosen, rejected)``, each ``[N]``.
    """
    n = pairs["chosen_ids"].shape[0]
    out = policy(  # __call__, not .forward: FSDP2's hooks unshard the root's parameters
        forward_type="default_forward",
        forward_inputs={
            "input_ids": torch.cat([pairs["chosen_ids"], pairs["rejected_ids"]]),
            "attention_mask": torch.cat([pairs["chosen_mask"], pairs["rejected_mask"]]),
        },
    )
    rewards = out["rewards"].float()
    return rewards[:n], rewards[n:]


@torch.no_grad()
def score_pairs(
    policy: BasePolicy, pairs: dict[str, torch.Tensor], parts: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of the chosen and rejected rows of ``pairs``, in ``parts`` forward passes.

    Every data-parallel rank must make the same number of passes (FSDP gathers the weights
    in each): give each rank the same number of rows and the same ``parts``.

    Returns:
        ``(chosen, rejected)``, each ``[N]`` float32.
    """
    outs = [pair_rewards(policy, part) for part in split_rows(pairs, max(1, parts))]
    return torch.cat([c for c, _ in outs]), torch.cat([r for _, r in outs])


def reward_model_update(
    policy: BasePolicy,
    optimizer: torch.optim.Optimizer,
    shard: dict[str, torch.Tensor],
    total_pairs: int,
    micro_batch_size: int,
    max_grad_norm: float | None,
    world_size: int = 1,
    *,
    guard: SkippedUpdateGuard | None = None,
    iteration: int | None = None,
) -> dict[str, float]:
    """One optimizer step of the Bradley-Terry loss on this rank's pairs.

    The loss is the mean over the *global* batch (``total_pairs`` over every rank), so
    micro-batches (gradient accumulation) and data-parallel ranks (FSDP averages gradients,
    hence the ``world_size`` factor) add up to the loss of the whole batch. A step whose
    loss or gradient norm is not finite on any rank is skipped on every rank.

    Args:
        policy: The (possibly FSDP-sharded) reward model, in train mode.
        optimizer: Its optimizer (learning rate already set).
        shard: This rank's pairs (:data:`PAIR_KEYS`).
        total_pairs: Pairs in the global batch.
        micro_batch_size: Pairs per forward/backward.
        max_grad_norm: Gradient clipping norm (None: no clipping).
        world_size: Data-parallel ranks.
        guard: Tracks skipped updates across calls (default: one that stops at the first).
        iteration: Training iteration, named in the messages about skipped updates.

    Returns:
        This rank's shares (they sum over ranks to the batch's values) of
        ``train/rm_loss``, ``train/pairwise_accuracy`` and ``train/reward_margin``, with
        ``train/grad_norm`` and ``train/skipped_updates`` divided by ranks.

    Raises:
        SkippedUpdatesError: The guard's limit of skipped updates in a row was reached.
    """
    guard = guard or SkippedUpdateGuard(1)
    n = shard["chosen_ids"].shape[0]
    loss_sum = correct = margin = 0.0
    for part in split_rows(shard, max(1, -(-n // micro_batch_size))):
        chosen, rejected = pair_rewards(policy, part)
        losses = -F.logsigmoid(chosen - rejected)
        loss = losses.sum() * world_size / total_pairs
        loss.backward()
        loss_sum += float(loss.detach()) / world_size
        correct += float((chosen > rejected).sum())
        margin += float((chosen - rejected).detach().sum())
    applied, norm = guarded_step(
        policy,
        optimizer,
        loss_sum,
        max_grad_norm,
        world_size,
        guard,
        iteration,
        "reward-model step",
    )
    return {
        "train/rm_loss": loss_sum if applied else 0.0,
        "train/pairwise_accuracy": correct / total_pairs,
        "train/reward_margin": margin / total_pairs,
        "train/grad_norm": norm / world_size if applied else 0.0,
        "train/skipped_updates": 0.0 if applied else 1.0 / world_size,
    }
