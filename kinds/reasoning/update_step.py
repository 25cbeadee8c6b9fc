"""The update step of a reasoning runtime: the batch shuffled, sharded and trained on."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from infra.cluster.dispatch import Parts, take_rows
from infra.cluster.worker_group import WorkerGroup
from infra.driver.step_runtime import StepResult
from kinds.reasoning.responses import ResponseBatch
from rl_core.seeding import update_shuffle_seed
from rl_core.training.llm_update import minibatch_totals, rank_rows
from rl_core.training.parallel_layout import ParallelLayout
from rl_core.training.rank_balance import row_lengths


def update_step(
    actor: WorkerGroup,
    layout: ParallelLayout,
    batch: ResponseBatch,
    actor_cfg: Any,
    seed: int,
    iteration: int,
    timeout: float,
) -> StepResult:
    """Shuffle rows, shard them across trainer ranks, update; metrics reduced over replicas.

    With ``actor.balance_batch`` each rank's part of every minibatch holds about the same
    number of tokens (:func:`~rl_core.training.rank_balance.balanced_split`).

    Args:
        actor: The trainer ranks.
        layout: How trainer ranks are grouped (tensor-parallel peers get the same rows).
        batch: The batch, its padded arrays filled by the advantage step.
        actor_cfg: The ``actor`` section (minibatches, update epochs).
        seed: The run's seed (``run.seed``); the shuffle derives from it and ``iteration``.
        iteration: The iteration updating.
        timeout: Seconds the trainer ranks may take (``timeouts.update``).
    """
    start = time.perf_counter()
    # the arrays' rows: the responses, or one per model turn (rewritten agent contexts)
    num_rows = len(batch.arrays["response_ids"])
    order = np.random.default_rng(update_shuffle_seed(seed, iteration)).permutation(num_rows)
    arrays = {k: v[order] for k, v in batch.arrays.items()}
    lengths = row_lengths(arrays) if actor_cfg.balance_batch else None
    rows = rank_rows(len(order), actor_cfg.num_minibatches, layout.replicas, lengths)
    shards = [take_rows(arrays, r) for r in rows]
    totals = minibatch_totals(
        [{k: torch.from_numpy(v) for k, v in s.items()} for s in shards],
        actor_cfg.num_minibatches,
    )
    metrics = actor.update(
        Parts(shards), [(t.tokens, t.seqs) for t in totals], iteration, within=("update", timeout)
    )
    seconds = time.perf_counter() - start
    # throughput: every token the forward pass processes (tool output included)
    tokens = arrays["prompt_mask"].sum() + arrays["response_mask"].sum()
    metrics["train/tokens_per_second"] = (
        float(tokens) * actor_cfg.update_epochs / max(seconds, 1e-9)
    )
    return StepResult.of(seconds, metrics)
