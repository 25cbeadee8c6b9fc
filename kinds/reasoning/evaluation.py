"""Held-out evaluation of a reasoning run: greedy accuracy, pass@k (unbiased), sample rows."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from kinds.reasoning.responses import ResponseBatch
from kinds.reasoning.reward_scoring import score_chunk
from rl_core.agents.metrics import trajectory_metrics_by_kind
from rl_core.pass_at_k import mean_pass_at_k

if TYPE_CHECKING:
    from kinds.reasoning.runtime import ReasoningRuntime


def correctness(
    runtime: ReasoningRuntime, chunk: dict[str, list[Any]], scores: list[float] | None = None
) -> np.ndarray:
    """1.0 for each completion the ``eval.correct_when`` reward gives its full score, else 0.

    ``scores`` are the configured reward's scores of ``chunk``: reused when that reward is
    the one deciding (code_tests need not run the tests twice).
    """
    reward_cfg = dict(runtime.config_dict["reward"])
    name = runtime.cfg.eval.correct_when
    if scores is None or name != runtime.cfg.reward.reward_type:
        scores = score_chunk({**reward_cfg, "reward_type": name, "scale": 1.0}, chunk)
        full = 1.0
    else:
        full = float(reward_cfg.get("scale", 1.0))
    values = np.asarray(scores, dtype=np.float64)
    return (np.nan_to_num(values, nan=0.0) >= full - 1e-6).astype(np.float32)


def evaluate_heldout(
    runtime: ReasoningRuntime, iteration: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Evaluate the rollout workers' current weights on the held-out prompts.

    Greedy responses give ``eval/accuracy`` (completions the ``eval.correct_when`` reward,
    ``math_verify`` by default, scores in full: :func:`correctness`) and ``eval/return_mean``
    (the configured reward); ``eval.pass_k`` sampled responses per prompt give
    ``eval/pass_at_1`` and ``eval/pass_at_<k>``, the unbiased estimates of
    :mod:`rl_core.pass_at_k` (pass@k with k = ``eval.pass_k``: the share of prompts with a
    correct sampled response; pass@1: the mean share of correct sampled responses).

    Args:
        runtime: The :class:`~kinds.reasoning.runtime.ReasoningRuntime` (weights synced).
        iteration: Iteration index (recorded in the sample rows).

    Returns:
        ``(metrics, rows)``: metrics, and ``eval.sample_rows`` rows of prompt, model input
        (the prompt as the model saw it: ``data.prompt_template`` and the chat template
        applied), completion, answer, reward and correctness for an MLflow table.
    """
    start = time.perf_counter()
    n, k = len(runtime.eval_prompts), runtime.cfg.eval.pass_k
    greedy, _ = runtime.generate(
        runtime.eval_prompts, runtime.sampling_params(greedy=True), seed=0, step="evaluate"
    )
    eval_batch = ResponseBatch(
        runtime.eval_samples,
        runtime.eval_prompts,
        greedy["response_ids"],
        trajectories=greedy.get("trajectories", []),
    )
    chunk = runtime.reward_chunk(eval_batch, list(range(n)))
    score = getattr(runtime, "score_in_process", None)  # with reward-model workers, if any
    scores = score(eval_batch) if score else score_chunk(runtime.config_dict["reward"], chunk)
    correct = correctness(runtime, chunk, scores)
    rows = [i for i in range(n) for _ in range(k)]
    sampled, _ = runtime.generate(
        [runtime.eval_prompts[i] for i in rows], runtime.sampling_params(), seed=1, step="evaluate"
    )
    sampled_batch = ResponseBatch(
        [runtime.eval_samples[i] for i in rows],
        [runtime.eval_prompts[i] for i in rows],
        sampled["response_ids"],
        trajectories=sampled.get("trajectories", []),
    )
    hits = correctness(runtime, runtime.reward_chunk(sampled_batch, list(range(len(rows)))))
    counts = hits.reshape(n, k).sum(axis=1)
    metrics = {
        "seconds": time.perf_counter() - start,
        "eval/return_mean": float(np.nanmean(scores)) if np.isfinite(scores).any() else 0.0,
        "eval/accuracy": float(np.mean(correct)),
        "eval/response_length_mean": float(np.mean([len(r) for r in greedy["response_ids"]])),
        "eval/prompts": float(n),
    }
    for at in sorted({1, k}):  # unbiased estimates from the k samples of each prompt
        metrics[f"eval/pass_at_{at}"] = mean_pass_at_k(counts, k, at)
    kinds = [sample.fields.get("kind") for sample in runtime.eval_samples]
    for kind in sorted({k for k in kinds if k is not None}, key=str):  # e.g. mul and add
        metrics[f"eval/accuracy/{kind}"] = float(
            np.mean([c for c, k in zip(correct, kinds, strict=True) if k == kind])
        )
    # agent loops: tool use of the greedy trajectories (eval/agent/tool_call_rate...)
    metrics |= trajectory_metrics_by_kind(greedy.get("trajectories", []), kinds, "eval/agent/")
    table = [
        {
            "iteration": iteration,
            "prompt": chunk["prompts"][i],
            # what the model was given: templates applied, special tokens shown
            "model_input": runtime.tokenizer.decode(runtime.eval_prompts[i]),
            "completion": chunk["completions"][i],
            "answer": chunk["answers"][i],
            "reward": float(scores[i]),
            "correct": bool(correct[i] > 0),
        }
        for i in range(min(n, runtime.cfg.eval.sample_rows))
    ]
    return metrics, table
