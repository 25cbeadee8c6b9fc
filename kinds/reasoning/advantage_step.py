"""The advantage step of a reasoning runtime: log-probs, reference, token rewards, advantages."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from infra.cluster.dispatch import Parts, take_rows
from infra.driver.step_runtime import StepResult
from kinds.reasoning.responses import pad_right_float
from rl_core.agents.per_turn import has_rewritten_contexts, split_turn_rows
from rl_core.algorithms import GroupIndexError
from rl_core.llm import pad_left, pad_loss_masks, pad_right
from rl_core.training.llm_advantage import compute_llm_advantages, unscored_loss_mask
from rl_core.training.loss_mask import LOSS_MASK, loss_mask_of
from rl_core.training.rank_balance import balanced_split, row_lengths

if TYPE_CHECKING:
    from kinds.reasoning.runtime import ReasoningRuntime


def _shards(
    runtime: ReasoningRuntime, arrays: dict[str, np.ndarray]
) -> tuple[Any, np.ndarray | None]:
    """The rows as the trainer ranks get them (tensor-parallel peers share their part).

    The arrays themselves, cut into contiguous parts by ``compute_logprobs``' declared
    split, or with ``actor.balance_batch`` parts of about equal tokens.

    Returns:
        The rows argument, and the batch's row of each row of the parts laid end to end
        (None: the parts are in batch order).
    """
    if not runtime.cfg.actor.balance_batch:
        return arrays, None
    split = balanced_split(row_lengths(arrays), runtime.layout.replicas)
    rows = [np.asarray(r, dtype=np.int64) for r in split]
    return Parts([take_rows(arrays, r) for r in rows]), np.concatenate(rows)


def _padded(
    runtime: ReasoningRuntime, prompts: list[list[int]], responses: list[list[int]]
) -> dict:
    """Prompts padded on the left, responses on the right, with their masks (numpy)."""
    pad = int(runtime.tokenizer.pad_token_id)
    p_ids, p_mask = pad_left(prompts, pad)
    r_ids, r_mask = pad_right(responses, pad)
    return {
        "prompt_ids": p_ids.numpy(),
        "prompt_mask": p_mask.numpy(),
        "response_ids": r_ids.numpy(),
        "response_mask": r_mask.numpy(),
    }


def _score(runtime: ReasoningRuntime, arrays: dict[str, np.ndarray]) -> tuple[Any, Any, Any]:
    """Trainer log-probs (and values) and reference log-probs of the padded rows.

    The reference log-probs also go into ``arrays`` (``ref_logprobs``).
    """
    shards, order = _shards(runtime, arrays)
    # the replicas' rows laid end to end, put back in the batch's order
    out = runtime.actor.compute_logprobs(shards, within=("advantage", runtime.timeouts.advantage))
    if order is not None:
        inverse = np.argsort(order)
        out = {k: v[inverse] for k, v in out.items()}
    outs = [out]
    old = torch.tensor(outs[0]["logprobs"])
    values = torch.tensor(outs[0]["values"]) if "values" in outs[0] else None
    ref_lp = runtime.engines.reference_logprobs(outs, arrays, runtime.timeouts.advantage)
    if ref_lp is None:
        return old, values, None
    ref = torch.tensor(ref_lp)
    arrays["ref_logprobs"] = ref.numpy()
    return old, values, ref


def _tool_mask(runtime: ReasoningRuntime, arrays: dict[str, np.ndarray]) -> None:
    """The loss mask of the padded trajectory rows when they hold tool tokens."""
    batch = runtime.batch
    if batch.loss_masks:
        width = arrays["response_ids"].shape[1]
        arrays[LOSS_MASK] = pad_loss_masks(batch.loss_masks, batch.response_ids, width).numpy()


def _drop_unscored(arrays: dict[str, np.ndarray], scores: torch.Tensor) -> None:
    """Unscored rows (NaN scores) get loss mask 0: no gradient in the update."""
    if not torch.isfinite(scores).all():
        current = torch.from_numpy(loss_mask_of(arrays))
        arrays[LOSS_MASK] = unscored_loss_mask(scores, current).numpy()


def advantage_step(runtime: ReasoningRuntime, iteration: int) -> StepResult:
    """Trainer log-probs (and values), reference log-probs, token rewards, advantages.

    The batch's rows are padded into arrays, scored by the trainer ranks (and the reference
    model), and kept on ``runtime.batch.arrays`` for the update, with the rollout engine's
    log-probs (the behaviour policy's) beside the trainer's; ``rollout/logprob_mismatch``
    is their mean absolute difference. The rows' ``group_index`` goes into the estimator and
    the arrays, so it follows the rows wherever the update shuffles or splits them. A batch
    with loss masks (multi-turn: tool output inside the responses) gets a ``loss_mask``
    array, and its advantages and the mismatch count the model's tokens only; so does a batch
    with unscored rows (NaN scores: :func:`~kinds.reasoning.reward_step.collect_rewards`),
    whose loss mask is 0 on those rows.

    Trajectories whose context was rewritten (``agent.context`` other than ``append``)
    train one row per model turn (:mod:`rl_core.agents.per_turn`): the advantages are
    computed on the trajectories, then each turn row, its input followed by its tokens, is
    scored by the trainer and takes its tokens' advantages.
    """
    start = time.perf_counter()
    batch = runtime.batch
    groups = np.asarray(batch.group_index, dtype=np.int64)
    if groups.shape != (len(batch),):
        raise GroupIndexError(
            f"the batch has {len(batch)} responses but {len(groups)} group indices"
        )
    scores = torch.from_numpy(batch.scores)
    per_turn = batch.trajectories and has_rewritten_contexts(batch.trajectories)
    arrays, metrics = (_per_turn_arrays if per_turn else _trajectory_arrays)(
        runtime, scores, groups
    )
    runtime.batch.arrays = arrays
    valid = loss_mask_of(arrays).astype(bool)
    gap = np.abs(arrays["old_logprobs"] - arrays["rollout_logprobs"])[valid]
    mismatch = float(gap.mean()) if gap.size else 0.0
    return StepResult.of(
        time.perf_counter() - start, {**metrics, "rollout/logprob_mismatch": mismatch}
    )


def _trajectory_arrays(
    runtime: ReasoningRuntime, scores: torch.Tensor, groups: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """One row per response: the update's arrays and the advantage metrics."""
    batch = runtime.batch
    arrays = _padded(runtime, batch.prompt_ids, batch.response_ids)
    _tool_mask(runtime, arrays)
    old, values, ref = _score(runtime, arrays)
    _drop_unscored(arrays, scores)
    trained = torch.from_numpy(loss_mask_of(arrays))
    result = compute_llm_advantages(
        scores,
        torch.from_numpy(arrays["response_mask"]),
        old,
        runtime.cfg.algorithm,
        values,
        ref,
        group_index=groups,
        loss_mask=trained if LOSS_MASK in arrays else None,
    )
    rollout_lp = pad_right_float(batch.rollout_logprobs, arrays["response_ids"].shape[1])
    arrays.update(
        group_index=groups,
        old_logprobs=old.numpy(),
        advantages=result.advantages.float().numpy(),
        rollout_logprobs=rollout_lp.float().numpy(),  # the behaviour policy's
    )
    if values is not None:
        arrays.update(old_values=values.numpy(), returns=result.returns.float().numpy())
    return arrays, result.metrics


def _per_turn_arrays(
    runtime: ReasoningRuntime, scores: torch.Tensor, groups: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """One row per model turn (see :func:`advantage_step`); the same return values."""
    batch = runtime.batch
    flat = _padded(runtime, batch.prompt_ids, batch.response_ids)
    _tool_mask(runtime, flat)
    _drop_unscored(flat, scores)
    trained = torch.from_numpy(loss_mask_of(flat))
    response_mask = torch.from_numpy(flat["response_mask"])
    # outcome estimators only (the config refuses critics and a KL penalty in the reward):
    # the trainer's log-probs of the flat rows do not enter these advantages
    result = compute_llm_advantages(
        scores,
        response_mask,
        torch.zeros(response_mask.shape),
        runtime.cfg.algorithm,
        group_index=groups,
        loss_mask=trained,
    )
    turns = split_turn_rows(
        batch.prompt_ids, batch.response_ids, batch.rollout_logprobs, batch.trajectories
    )
    if not len(turns):
        raise RuntimeError("no trajectory of the batch has a model token to train on")
    arrays = _padded(runtime, turns.prompt_ids, turns.response_ids)
    width = arrays["response_ids"].shape[1]
    mask = np.zeros((len(turns), width), dtype=np.float32)
    advantages = np.zeros((len(turns), width), dtype=np.float32)
    for i, (row, (lo, hi)) in enumerate(zip(turns.source, turns.spans, strict=True)):
        mask[i, : hi - lo] = trained[row, lo:hi].numpy()
        advantages[i, : hi - lo] = result.advantages[row, lo:hi].float().numpy()
    arrays[LOSS_MASK] = mask
    old, _, _ = _score(runtime, arrays)
    rollout_lp = pad_right_float(turns.logprobs, width)
    arrays.update(
        group_index=groups[np.asarray(turns.source, dtype=np.int64)],
        old_logprobs=old.numpy(),
        advantages=advantages,
        rollout_logprobs=rollout_lp.float().numpy(),
    )
    return arrays, {**result.metrics, "agent/turn_rows": float(len(turns))}
