"""Agent loops in a reasoning run on Ray: rollout workers run multi-turn trajectories (tool
output between model turns, loss mask 0), the trainer's log-probs equal the rollout's, a
retried rollout gives the same trajectories, async mode measures staleness on model
tokens only, and a rewritten context trains one row per model turn. The tool-call syntax and tool come from an extension module (as a user's
would), loaded by every worker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from infra.driver.runtimes import make_runtime
from rl_core.config import RLPipeConfig, load_config
from tests.in_process import run_iterations

FIXTURE_MODULES = Path(__file__).parents[1] / "fixtures" / "ext_modules"

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("agent_ext", "ray_local")]


@pytest.fixture(scope="module")
def agent_ext() -> Iterator[None]:
    """``RLPIPE_EXT_MODULE=ext_agent_echo`` here and in every worker."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLPIPE_EXT_MODULE", "ext_agent_echo")
        path = os.environ.get("PYTHONPATH", "")
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(FIXTURE_MODULES), path) if p))
        patch.syspath_prepend(str(FIXTURE_MODULES))
        from infra.extensions import load_extension_modules

        load_extension_modules()
        yield


@pytest.fixture(scope="module")
def tiny_dir(tiny_lm_one_layer: str) -> str:
    return tiny_lm_one_layer


def config(tiny_dir: str, *extra: str) -> RLPipeConfig:
    return load_config(
        overrides=[
            "model.model_type=hf_causal_lm",
            f"model.model_path={tiny_dir}",
            "data.prompts_per_batch=4",
            "data.eval_size=4",
            "rollout.max_new_tokens=4",
            "agent.loop=tool_loop",
            "agent.parser=every_turn_calls",
            "agent.tools=[echo]",
            "agent.max_turns=3",
            "agent.max_total_tokens=48",
            "agent.call_cost=0.01",
            "algorithm.adv_type=grpo",
            "algorithm.group_size=4",
            "reward.reward_type=format",
            "reward.format_pattern='got [0-9]'",
            "reward.num_tasks=1",
            "actor.num_minibatches=1",
            "actor.update_epochs=1",
            "actor.micro_batch_size=16",
            "actor.lr=1e-2",
            "tracking.enabled=false",
            "cluster.hybrid_engine=off",
            *extra,
        ]
    )


def test_multi_turn_rollouts_train_and_a_retried_rollout_gives_the_same_trajectories(tiny_dir):
    runtime = make_runtime(config(tiny_dir))
    try:
        initial = runtime.actor.full_state()[0]
        (first,) = run_iterations(runtime, range(1))
        # iteration 1's rollout runs, is undone (as before a retry), and runs again
        runtime.weight_sync(1)
        runtime.snapshot("rollout")
        runtime.rollout(1)
        undone = runtime.batch
        runtime.restore("rollout")
        (second,) = run_iterations(runtime, range(1, 2))
        batch = runtime.batch
        weights = runtime.actor.full_state()[0]
    finally:
        runtime.shutdown()
    assert batch.response_ids == undone.response_ids and batch.loss_masks == undone.loss_masks
    assert any(not np.array_equal(initial[k], weights[k]) for k in weights), "no update moved"
    rollout = second["rollout"].metrics
    assert rollout["agent/turns_mean"] > 1.0 and rollout["agent/tool_calls_mean"] > 0
    assert 0 < rollout["agent/masked_token_fraction"] < 1
    assert rollout["agent/infra_failure_rate"] == 0.0
    assert len(batch.trajectories) == len(batch.loss_masks) == 16
    for ids, mask, summary in zip(
        batch.response_ids, batch.loss_masks, batch.trajectories, strict=True
    ):
        assert len(mask) == len(ids)
        assert sum(mask) == sum(end - start for start, end, model in summary["turn_spans"] if model)
    # the trainer scores the trajectories' model tokens as the rollout engine sampled them
    for steps in (first, second):
        assert steps["advantage"].metrics["rollout/logprob_mismatch"] < 1e-5
    traces = second["reward"].info["agent_traces"]
    assert len(traces) == 2 and {t["role"] for t in traces[0]["turns"]} <= {"model", "tool"}


def test_async_mode_runs_agent_loops_with_pinned_versions(tiny_dir):
    runtime = make_runtime(config(tiny_dir, "run.mode=async", "algorithm.max_staleness=1"))
    try:
        results = run_iterations(runtime, range(3))
        batch = runtime.batch
    finally:
        runtime.shutdown()
    metrics = [steps["rollout"].metrics for steps in results]
    assert [m["async/staleness_max"] for m in metrics] == [0.0, 1.0, 1.0]
    assert metrics[-1]["agent/turns_mean"] > 1.0
    assert batch.trajectories and batch.loss_masks


def test_a_rewritten_context_trains_one_row_per_model_turn_as_generated(tiny_dir):
    runtime = make_runtime(config(tiny_dir, "agent.context=last_exchange"))
    try:
        initial = runtime.actor.full_state()[0]
        (steps,) = run_iterations(runtime, range(1))
        batch = runtime.batch
        weights = runtime.actor.full_state()[0]
    finally:
        runtime.shutdown()
    model_turns = sum(
        1
        for s in batch.trajectories
        for start, end, model in s["turn_spans"]
        if model and end > start
    )
    assert any(s["turn_contexts"] for s in batch.trajectories), "no turn saw a rewritten input"
    advantage = steps["advantage"].metrics
    assert advantage["agent/turn_rows"] == model_turns > len(batch)
    assert len(batch.arrays["response_ids"]) == model_turns
    # each turn row is scored after the input the engine generated it from: a flat row
    # (the whole history) would not give the sampled log-probs back
    assert advantage["rollout/logprob_mismatch"] < 1e-5
    assert any(not np.array_equal(initial[k], weights[k]) for k in weights), "no update moved"
