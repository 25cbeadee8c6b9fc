"""The reward steps of a reasoning runtime: fan-out jobs for a batch, and their scores collected."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from infra.driver.step_runtime import FanoutJob, StepResult
from kinds.reasoning.agent_traces import trace_rows
from kinds.reasoning.model_reward_step import combine
from kinds.reasoning.responses import ResponseBatch, reward_chunk
from kinds.reasoning.reward_scoring import score_chunk
from rl_core.agents.metrics import apply_call_cost, reward_by_tool_use, unscored_rows
from rl_core.algorithms import overlong_penalty
from rl_core.seeding import model_reward_seed

if TYPE_CHECKING:
    from kinds.reasoning.runtime import ReasoningRuntime


def reward_jobs(
    batch: ResponseBatch,
    tokenizer: Any,
    reward_cfg: dict[str, Any],
    num_tasks: int,
) -> list[FanoutJob]:
    """Chunks of ``batch`` for the reward fan-out tasks (up to ``num_tasks`` of them).

    Args:
        batch: The responses to score.
        tokenizer: Decodes the completions.
        reward_cfg: The ``reward`` section as a plain dict (what the tasks build it from).
        num_tasks: Chunks to split the batch into (``reward.num_tasks``).
    """
    parts = np.array_split(np.arange(len(batch)), num_tasks)
    return [
        FanoutJob(
            "score_rewards",
            score_chunk,
            {"reward_cfg": reward_cfg, "chunk": reward_chunk(tokenizer, batch, p.tolist())},
        )
        for p in parts
        if len(p)
    ]


def collect_rewards(
    batch: ResponseBatch,
    results: list[list[float]],
    algorithm: Any,
    max_new_tokens: int,
    call_cost: float = 0.0,
) -> dict[str, float]:
    """Set ``batch.scores`` (plus DAPO's overlong penalty, minus a tool-call cost).

    A row nobody could score through no fault of the model's (a tool call that still failed
    through the machinery after its retries, or a reward that returned NaN) gets the score
    NaN, never a silent 0: the advantage step leaves it out of its group's statistics and
    gives it no gradient (:func:`rl_core.training.llm_advantage.compute_llm_advantages`).

    Args:
        batch: The scored responses.
        results: Each job's scores, in job order.
        algorithm: The ``algorithm`` section (overlong buffer and penalty factor).
        max_new_tokens: The response length limit (``rollout.max_new_tokens``).
        call_cost: Subtracted per tool call of a row's trajectory (``agent.call_cost``).

    Returns:
        ``rollout/reward_mean`` (of the scored rows, before penalty and cost),
        ``rollout/unscored_fraction``, ``rollout/overlong_penalty_mean`` and, for agent
        trajectories, the reward with and without tool calls
        (:func:`~rl_core.agents.metrics.reward_by_tool_use`, ``agent/...``).

    Raises:
        RuntimeError: The scores do not match the responses one for one, or no row could be
            scored (nothing to train on: the step fails, and is retried).
    """
    scores = np.asarray([s for part in results for s in part], dtype=np.float32)
    if scores.shape != (len(batch),):
        raise RuntimeError(f"got {scores.shape} rewards for {len(batch)} responses")
    unscored = unscored_rows(scores, batch.trajectories)
    if unscored and len(unscored) == len(batch):
        raise RuntimeError(
            f"none of the {len(batch)} responses could be scored (tool infrastructure "
            "failures or NaN rewards): nothing to train on"
        )
    scores[unscored] = np.nan
    scored = np.isfinite(scores)
    metrics = {
        "rollout/reward_mean": float(scores[scored].mean()),
        "rollout/unscored_fraction": len(unscored) / len(batch),
    }
    if batch.trajectories:  # does a call pay? (the reward before penalty and call cost)
        kinds = [sample.fields.get("kind") for sample in batch.samples] or [None] * len(batch)
        metrics |= reward_by_tool_use(scores, batch.trajectories, kinds)
    if algorithm.overlong_buffer_length:
        lengths = torch.tensor([len(r) for r in batch.response_ids])
        penalty = overlong_penalty(
            lengths,
            max_new_tokens,
            algorithm.overlong_buffer_length,
            algorithm.overlong_penalty_factor,
        ).numpy()
        scores = scores + penalty
        metrics["rollout/overlong_penalty_mean"] = float(penalty[scored].mean())
    if batch.trajectories and call_cost:
        scores = apply_call_cost(scores, batch.trajectories, call_cost)
    batch.scores = scores
    return metrics


def reward_step(runtime: ReasoningRuntime, iteration: int, results: list[Any] | None) -> StepResult:
    """Collect the fan-out tasks' scores (plus DAPO's overlong penalty).

    With a model reward, the reward-model workers score the batch here and the components
    are added up with their weights (:mod:`kinds.reasoning.model_reward_step`).

    Args:
        runtime: The reasoning runtime (its batch, reward plan and reward-model scorer).
        iteration: The iteration scoring (seeds the model's scoring).
        results: The fan-out tasks' results, in job order.
    """
    start = time.perf_counter()
    cfg, batch = runtime.cfg, runtime.batch
    component_metrics: dict[str, float] = {}
    if runtime.model_reward is not None:
        seed = model_reward_seed(cfg.run.seed, iteration)
        chunk = runtime.reward_chunk(batch, list(range(len(batch))))
        model = runtime.model_reward.score(
            chunk["prompts"], chunk["completions"], seed, runtime.timeouts.reward
        )
        combined, component_metrics = combine(runtime.reward_plan, results, model)
        results = [combined]
    metrics = component_metrics | collect_rewards(
        batch,
        results or [],
        cfg.algorithm,
        cfg.rollout.max_new_tokens,
        cfg.agent.call_cost,
    )
    # a sample of the scored trajectories, logged as MLflow traces once per iteration
    traces = trace_rows(batch, runtime.tokenizer, cfg.tracking.agent_traces)
    info = {"agent_traces": traces} if traces else {}
    return StepResult(time.perf_counter() - start, metrics, info=info)
