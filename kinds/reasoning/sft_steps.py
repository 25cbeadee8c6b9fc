"""The supervised warm-start step of a reasoning runtime (``flows/sft.py``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from infra.driver.step_runtime import StepResult
from rl_core.agents.trajectory import trace_tokens
from rl_core.llm import pad_left, pad_loss_masks, pad_right
from rl_core.training.loss_mask import LOSS_MASK, loss_mask_of

if TYPE_CHECKING:
    from kinds.reasoning.runtime import ReasoningRuntime


def sft_step(runtime: ReasoningRuntime, iteration: int) -> StepResult:
    """Supervised steps of one SFT iteration (``actor.sft_steps_per_iteration`` of them).

    Each step trains on the next ``data.prompts_per_batch`` prompt→answer pairs; metrics
    are averaged over the steps (``train/skipped_updates`` is their sum). The target is the
    row's ``trace`` field when it has one (a tool-use trace: its tool segments are context,
    loss mask 0; :func:`~rl_core.agents.trajectory.trace_tokens`), else its ``solution``
    (GSM8K's worked answer, ending in ``#### <answer>``), else its ``answer``, followed by
    the end-of-sequence token.
    """
    start = time.perf_counter()
    steps = runtime.cfg.actor.sft_steps_per_iteration
    results = [_sft_batch(runtime, iteration) for _ in range(steps)]
    metrics = {k: sum(r[k] for r in results) / steps for k in results[0] if k != "samples"}
    metrics["train/skipped_updates"] = sum(r["train/skipped_updates"] for r in results)
    samples = int(sum(r["samples"] for r in results))
    return StepResult.of(time.perf_counter() - start, metrics, env_steps=samples)


def _sft_batch(runtime: ReasoningRuntime, iteration: int) -> dict[str, float]:
    rows = runtime.sampler.next_indices()
    eos = int(runtime.tokenizer.eos_token_id)

    def tokenize(text: str) -> list[int]:
        return list(runtime.tokenizer(text, add_special_tokens=False)["input_ids"])

    targets, masks = [], []
    for i in rows:
        sample = runtime.train_samples[i]
        if "trace" in sample.fields:  # a tool-use trace: tool output is not trained on
            ids, mask = trace_tokens(sample.fields["trace"], tokenize)
        else:
            ids = tokenize(str(sample.fields.get("solution", sample.answer)))
            mask = [1] * len(ids)
        targets.append([*ids, eos])
        masks.append([*mask, 1])
    pad = int(runtime.tokenizer.pad_token_id)
    p_ids, p_mask = pad_left([runtime.train_prompts[i] for i in rows], pad)
    r_ids, r_mask = pad_right(targets, pad)
    arrays = {
        "prompt_ids": p_ids.numpy(),
        "prompt_mask": p_mask.numpy(),
        "response_ids": r_ids.numpy(),
        "response_mask": r_mask.numpy(),
    }
    if any(0 in mask for mask in masks):
        arrays[LOSS_MASK] = pad_loss_masks(masks, targets, r_ids.shape[1]).numpy()
    totals = (float(loss_mask_of(arrays).sum()), len(rows))  # the tokens trained on
    # contiguous rows per replica (tensor-parallel peers train on the same rows)
    metrics = runtime.actor.sft_update(
        arrays, totals, iteration, within=("update", runtime.timeouts.update)
    )
    metrics["samples"] = float(len(rows))
    return metrics
