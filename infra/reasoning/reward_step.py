"""The reward steps of a reasoning runtime: fan-out jobs for a batch, and their scores collected."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from infra.driver.step_runtime import FanoutJob
from infra.reasoning.responses import ResponseBatch, reward_chunk
from infra.reasoning.reward_scoring import score_chunk
from rl_core.algorithms import overlong_penalty


def reward_jobs(
    batch: ResponseBatch,
    tokenizer: Any,
    reward_cfg: dict[str, Any],
    num_tasks: int,
    fault: Any,
) -> list[FanoutJob]:
    """Chunks of ``batch`` for the reward fan-out tasks (up to ``num_tasks`` of them).

    Args:
        batch: The responses to score.
        tokenizer: Decodes the completions.
        reward_cfg: The ``reward`` section as a plain dict (what the tasks build it from).
        num_tasks: Chunks to split the batch into (``reward.num_tasks``).
        fault: A fault injected into the first job (None: none).
    """
    parts = np.array_split(np.arange(len(batch)), num_tasks)
    return [
        FanoutJob(
            "score_rewards",
            score_chunk,
            {"reward_cfg": reward_cfg, "chunk": reward_chunk(tokenizer, batch, p.tolist())},
            fault if i == 0 else None,
        )
        for i, p in enumerate(parts)
        if len(p)
    ]


def collect_rewards(
    batch: ResponseBatch, results: list[list[float]], algorithm: Any, max_new_tokens: int
) -> dict[str, float]:
    """Set ``batch.scores`` from the fan-out tasks' scores (plus DAPO's overlong penalty).

    Args:
        batch: The scored responses.
        results: Each job's scores, in job order.
        algorithm: The ``algorithm`` section (overlong buffer and penalty factor).
        max_new_tokens: The response length limit (``rollout.max_new_tokens``).

    Returns:
        ``rollout/reward_mean`` (before the penalty) and ``rollout/overlong_penalty_mean``.

    Raises:
        RuntimeError: The scores do not match the responses one for one.
    """
    scores = np.asarray([s for part in results for s in part], dtype=np.float32)
    if scores.shape != (len(batch),):
        raise RuntimeError(f"got {scores.shape} rewards for {len(batch)} responses")
    metrics = {"rollout/reward_mean": float(scores.mean())}
    if algorithm.overlong_buffer_length:
        lengths = torch.tensor([len(r) for r in batch.response_ids])
        penalty = overlong_penalty(
            lengths,
            max_new_tokens,
            algorithm.overlong_buffer_length,
            algorithm.overlong_penalty_factor,
        ).numpy()
        scores = scores + penalty
        metrics["rollout/overlong_penalty_mean"] = float(penalty.mean())
    batch.scores = scores
    return metrics
