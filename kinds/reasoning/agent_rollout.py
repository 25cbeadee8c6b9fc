"""Agent loops inside a rollout worker: trajectories for a shard of prompts, as plain rows.

A rollout worker (or a hybrid trainer rank) calls :func:`run_agents` from its
``run_agents`` step method: every prompt of its shard runs the configured agent loop at
once (:func:`rl_core.agents.lockstep.run_lockstep`: tool calls in threads, generations
batched round by round through the engine's ``generate_turns``). One Ray call per shard, one
Prefect task per rollout step: tool calls never become tasks of their own.
"""

from __future__ import annotations

import time
from typing import Any

from infra.cluster.worker_base import Stopwatch
from rl_core.agents.context import APPEND
from rl_core.agents.lockstep import GenerationRequest, run_lockstep
from rl_core.agents.loops import LoopSettings, get_agent_loop
from rl_core.agents.trajectory import Budget, Trajectory
from rl_core.llm.generation import SamplingParams
from rl_core.seeding import generation_segment_seed

#: Keys of a trajectory's summary (its ``to_row`` without the token lists).
SUMMARY_KEYS = (
    "turn_spans",
    "num_turns",
    "num_tool_calls",
    "masked_fraction",
    "infra_failed",
    "finish_reason",
    "generation_times",
    "tool_calls",
    "turn_contexts",
)


def loop_settings(agent: dict[str, Any], max_new_tokens: int) -> LoopSettings:
    """:class:`LoopSettings` from the ``agent`` section (a dict) and the per-turn token limit."""
    tools = agent.get("tools")
    return LoopSettings(
        parser=agent.get("parser", "xml"),
        tools=None if tools is None else tuple(tools),
        budget=Budget(
            max_turns=int(agent.get("max_turns", 4)),
            max_total_tokens=int(agent.get("max_total_tokens", 512)),
            max_new_tokens=int(max_new_tokens),
        ),
        tool_retries=int(agent.get("tool_retries", 2)),
        context=agent.get("context", APPEND),
    )


def trajectory_rows(trajectories: list[Trajectory]) -> dict[str, list[Any]]:
    """The per-row lists a response batch takes, and each trajectory's summary."""
    rows = [t.to_row() for t in trajectories]
    return {
        "response_ids": [r["response_ids"] for r in rows],
        "logprobs": [r["logprobs"] for r in rows],
        "versions": [r["versions"] for r in rows],
        "loss_masks": [r["loss_mask"] for r in rows],
        "finished": [r["finish_reason"] == "eos" for r in rows],
        "trajectories": [{k: r[k] for k in SUMMARY_KEYS} for r in rows],
    }


def run_agents(
    engine: Any,
    prompt_ids: list[list[int]],
    sampling: dict[str, Any],
    seed: int | None,
    agent: dict[str, Any],
) -> dict[str, Any]:
    """One trajectory per prompt with ``engine`` (its loaded weights).

    Args:
        engine: A rollout engine with ``generate_turns`` and ``tokenizer``.
        prompt_ids: Token ids of each prompt.
        sampling: ``SamplingParams`` fields (``max_new_tokens``: the limit of one turn).
        seed: This shard's seed; round ``r`` samples with ``generation_segment_seed(seed, r)``.
        agent: The ``agent`` config section as a dict.

    Returns:
        ``response_ids``, ``logprobs``, ``versions``, ``loss_masks``, ``finished`` (ended
        with EOS) and ``trajectories`` (summaries: turns, tool calls, finish reason) per
        prompt, and the timings ``seconds``, ``started_at``, ``finished_at``.
    """
    watch, started = Stopwatch(), time.time()
    params = SamplingParams(**sampling)
    tokenizer = engine.tokenizer

    def generate_batch(requests: list[GenerationRequest], round_index: int) -> list[Any]:
        round_seed = None if seed is None else generation_segment_seed(seed, round_index)
        return engine.generate_turns(requests, params, round_seed)

    trajectories = run_lockstep(
        get_agent_loop(agent.get("loop", "tool_loop")),
        prompt_ids,
        loop_settings(agent, params.max_new_tokens),
        generate_batch,
        lambda text: list(tokenizer.encode(text, add_special_tokens=False)),
        lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True),
    )
    out: dict[str, Any] = trajectory_rows(trajectories)
    out.update(seconds=watch.elapsed(), started_at=started, finished_at=time.time())
    return out
