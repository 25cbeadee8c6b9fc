"""Held-out evaluation of a reasoning run: greedy accuracy, pass@k, sample completions."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from infra.reasoning.responses import ResponseBatch
from infra.reasoning.reward_scoring import score_chunk
from rl_core.agents.metrics import trajectory_metrics_by_kind
from rl_core.rewards.reasoning import math_verify_reward


def evaluate_heldout(runtime: Any, iteration: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Evaluate the rollout workers' current weights on the held-out prompts.

    Greedy responses give ``eval/accuracy`` (``math_verify``) and ``eval/return_mean`` (the
    configured reward); ``eval.pass_k`` sampled responses per prompt give
    ``eval/pass_at_<k>``.

    Args:
        runtime: The :class:`~infra.reasoning.runtime.ReasoningRuntime` (weights synced).
        iteration: Iteration index (recorded in the sample rows).

    Returns:
        ``(metrics, rows)``: metrics, and ``eval.sample_rows`` rows of prompt, completion,
        answer, reward and correctness for an MLflow table.
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
    scores = score_chunk(runtime.config_dict["reward"], chunk)
    correct = math_verify_reward(**chunk)
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
    hits = math_verify_reward(
        **runtime.reward_chunk(sampled_batch, list(range(len(rows))))
    ).reshape(n, k)
    metrics = {
        "seconds": time.perf_counter() - start,
        "eval/return_mean": float(np.mean(scores)),
        "eval/accuracy": float(np.mean(correct)),
        f"eval/pass_at_{k}": float((hits.max(axis=1) > 0).mean()),
        "eval/response_length_mean": float(np.mean([len(r) for r in greedy["response_ids"]])),
        "eval/prompts": float(n),
    }
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
            "completion": chunk["completions"][i],
            "answer": chunk["answers"][i],
            "reward": float(scores[i]),
            "correct": bool(correct[i] > 0),
        }
        for i in range(min(n, runtime.cfg.eval.sample_rows))
    ]
    return metrics, table
