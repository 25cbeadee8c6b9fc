"""Held-out evaluation of a reward model: pairwise accuracy, reward margin, sample rows.

The trainer ranks score the held-out pairs during a run
(:meth:`~kinds.reward_model.runtime.RewardModelRuntime.evaluate`);
:func:`evaluate_checkpoint_pairs` scores a committed checkpoint in this process (the
``evaluate-latest`` flow). Both report through :func:`pair_metrics` and :func:`sample_rows`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from kinds.reward_model.config import RewardModelConfig
from rl_core.data.preferences import PreferencePair, load_preference_pairs
from rl_core.models.reward_model import encode_pairs
from rl_core.training.reward_update import pairwise_accuracy, reward_margin, score_pairs


def pair_metrics(chosen: np.ndarray, rejected: np.ndarray) -> dict[str, float]:
    """``eval/pairwise_accuracy`` (also ``eval/return_mean``), ``eval/reward_margin``...

    Args:
        chosen: Rewards of the held-out pairs' chosen responses.
        rejected: Rewards of their rejected responses.
    """
    good, bad = torch.as_tensor(chosen), torch.as_tensor(rejected)
    accuracy = pairwise_accuracy(good, bad)
    return {
        "eval/pairwise_accuracy": accuracy,
        "eval/return_mean": accuracy,  # ranks checkpoints like every kind's return
        "eval/reward_margin": reward_margin(good, bad),
        "eval/reward_chosen_mean": float(good.mean()) if len(good) else 0.0,
        "eval/reward_rejected_mean": float(bad.mean()) if len(bad) else 0.0,
        "eval/pairs": float(len(good)),
    }


def sample_rows(
    pairs: list[PreferencePair], chosen: np.ndarray, rejected: np.ndarray, count: int
) -> list[dict[str, Any]]:
    """The first ``count`` held-out pairs with their rewards (an MLflow table)."""
    return [
        {
            "prompt": pair.prompt,
            "chosen": pair.chosen,
            "rejected": pair.rejected,
            "reward_chosen": float(good),
            "reward_rejected": float(bad),
            "correct": bool(good > bad),
        }
        for pair, good, bad in list(zip(pairs, chosen, rejected, strict=True))[:count]
    ]


def pair_batch(policy: Any, pairs: list[PreferencePair], max_length: int) -> dict[str, np.ndarray]:
    """``pairs`` tokenized with the reward model's tokenizer (see ``encode_pairs``)."""
    return encode_pairs(
        policy.pretrained_tokenizer(),
        policy.pad_token_id,
        [p.prompt for p in pairs],
        [p.chosen for p in pairs],
        [p.rejected for p in pairs],
        max_length,
    )


def evaluate_checkpoint_pairs(
    policy: Any, cfg: RewardModelConfig
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Pairwise accuracy of ``policy`` (a checkpoint's reward model) on ``cfg``'s held-out pairs.

    Returns:
        ``(metrics, sample rows)``; ``metrics["seconds"]`` is the time it took.
    """
    start = time.perf_counter()
    _, held = load_preference_pairs(cfg.data)
    batch = {
        k: torch.from_numpy(v) for k, v in pair_batch(policy, held, cfg.data.max_length).items()
    }
    parts = -(-len(held) // cfg.actor.micro_batch_size)
    chosen, rejected = (t.numpy() for t in score_pairs(policy.eval(), batch, parts))
    metrics = pair_metrics(chosen, rejected)
    metrics["seconds"] = time.perf_counter() - start
    return metrics, sample_rows(held, chosen, rejected, cfg.eval.sample_rows)
