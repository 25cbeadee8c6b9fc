"""The advantage step of a reasoning runtime: log-probs, reference, token rewards, advantages."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from infra.driver.step_runtime import StepResult
from infra.reasoning.responses import pad_right_float
from rl_core.algorithms import GroupIndexError
from rl_core.llm import pad_left, pad_loss_masks, pad_right
from rl_core.training.llm_advantage import compute_llm_advantages, unscored_loss_mask
from rl_core.training.loss_mask import LOSS_MASK, loss_mask_of


def _shards(runtime: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """One part of the rows per trainer rank (tensor-parallel peers share theirs)."""
    rows = np.array_split(np.arange(len(runtime.batch)), runtime.layout.replicas)
    return runtime.layout.per_rank([{k: v[r] for k, v in arrays.items()} for r in rows])


def advantage_step(runtime: Any, iteration: int) -> StepResult:
    """Trainer log-probs (and values), reference log-probs, token rewards, advantages.

    The batch's rows are padded into arrays, scored by the trainer ranks (and the reference
    model), and kept on ``runtime.batch.arrays`` for the update, with the rollout engine's
    log-probs (the behaviour policy's) beside the trainer's; ``rollout/logprob_mismatch``
    is their mean absolute difference. The rows' ``group_index`` goes into the estimator and
    the arrays, so it follows the rows wherever the update shuffles or splits them. A batch
    with loss masks (multi-turn: tool output inside the responses) gets a ``loss_mask``
    array, and its advantages and the mismatch count the model's tokens only; so does a batch
    with unscored rows (NaN scores: :func:`~infra.reasoning.reward_step.collect_rewards`),
    whose loss mask is 0 on those rows.
    """
    start = time.perf_counter()
    runtime.faults.arm("advantage", iteration, runtime.actor[0])
    groups = np.asarray(runtime.batch.group_index, dtype=np.int64)
    if groups.shape != (len(runtime.batch),):
        raise GroupIndexError(
            f"the batch has {len(runtime.batch)} responses but {len(groups)} group indices"
        )
    pad = int(runtime.tokenizer.pad_token_id)
    p_ids, p_mask = pad_left(runtime.batch.prompt_ids, pad)
    r_ids, r_mask = pad_right(runtime.batch.response_ids, pad)
    arrays = {
        "prompt_ids": p_ids.numpy(),
        "prompt_mask": p_mask.numpy(),
        "response_ids": r_ids.numpy(),
        "response_mask": r_mask.numpy(),
    }
    if runtime.batch.loss_masks:
        loss_mask = pad_loss_masks(
            runtime.batch.loss_masks, runtime.batch.response_ids, r_ids.shape[1]
        )
        arrays[LOSS_MASK] = loss_mask.numpy()
    outs = runtime.actor.get(
        [
            h.compute_logprobs.remote(s)
            for h, s in zip(runtime.actor.handles, _shards(runtime, arrays), strict=True)
        ],
        runtime.timeouts.advantage,
        "advantage",
    )
    outs = runtime.layout.per_replica(outs)
    old = torch.tensor(np.concatenate([o["logprobs"] for o in outs]))
    values = (
        torch.tensor(np.concatenate([o["values"] for o in outs])) if "values" in outs[0] else None
    )
    ref = None
    ref_lp = runtime.engines.reference_logprobs(outs, arrays, runtime.timeouts.advantage)
    if ref_lp is not None:
        ref = torch.tensor(ref_lp)
        arrays["ref_logprobs"] = ref.numpy()
    scores = torch.from_numpy(runtime.batch.scores)
    if not torch.isfinite(scores).all():  # unscored rows (NaN): no gradient in the update
        current = torch.from_numpy(loss_mask_of(arrays))
        arrays[LOSS_MASK] = unscored_loss_mask(scores, current).numpy()
    trained = torch.from_numpy(loss_mask_of(arrays))
    result = compute_llm_advantages(
        scores,
        r_mask,
        old,
        runtime.cfg.algorithm,
        values,
        ref,
        group_index=groups,
        loss_mask=trained if LOSS_MASK in arrays else None,
    )
    rollout_lp = pad_right_float(runtime.batch.rollout_logprobs, r_ids.shape[1])
    arrays.update(
        group_index=groups,
        old_logprobs=old.numpy(),
        advantages=result.advantages.float().numpy(),
        rollout_logprobs=rollout_lp.float().numpy(),  # the behaviour policy's
    )
    if values is not None:
        arrays.update(old_values=values.numpy(), returns=result.returns.float().numpy())
    runtime.batch.arrays = arrays
    valid = trained.bool()
    mismatch = float((old - rollout_lp)[valid].abs().mean()) if valid.any() else 0.0
    return StepResult.of(
        time.perf_counter() - start, {**result.metrics, "rollout/logprob_mismatch": mismatch}
    )
