"""Context builders (``agent.context``): a rewritten history is what the model is given,
each changed input is recorded, and training splits such trajectories into one row per
model turn, scored after exactly the input the engine saw."""

from __future__ import annotations

import pytest

from rl_core import api
from rl_core.agents.context import AGENT_CONTEXTS, get_agent_context
from rl_core.agents.loops import LoopSettings, get_agent_loop
from rl_core.agents.per_turn import has_rewritten_contexts, split_turn_rows
from rl_core.agents.trajectory import split_per_turn
from rl_core.config import ConfigError, load_config
from rl_core.registry import RegistryError
from tests.unit.test_agent_loops import PROMPT, TURN_1, TURN_2, TURN_3, ScriptedModel, detokenize

SCRIPT = [(TURN_1, "stop"), (TURN_2, "stop"), (TURN_3, "eos")]


def run(context: str):
    model = ScriptedModel(SCRIPT)
    traj = get_agent_loop("tool_loop")(PROMPT, model.io(), LoopSettings(context=context))
    return traj, model


def test_append_gives_the_whole_episode_and_records_nothing() -> None:
    traj, model = run("append")
    assert [call[0] for call in model.calls] == [
        PROMPT,
        PROMPT + traj.response_ids[: traj.turns[2].start],
        PROMPT + traj.response_ids[: traj.turns[4].start],
    ]
    assert traj.turn_contexts == {} and traj.to_row()["turn_contexts"] == []


def test_last_exchange_drops_older_turns_and_records_the_inputs_it_changed() -> None:
    traj, model = run("last_exchange")
    assert detokenize(traj.response_ids).startswith(TURN_1)  # the trajectory keeps it all
    third_input = model.calls[2][0]
    assert third_input == PROMPT + traj.response_ids[traj.turns[2].start : traj.turns[4].start]
    assert TURN_1 not in detokenize(third_input) and TURN_2 in detokenize(third_input)
    # turns 0 and 2 saw the append-only context (nothing to drop yet); turn 4 did not
    assert traj.turn_contexts == {4: third_input}
    assert traj.to_row()["turn_contexts"] == [[4, third_input]]
    samples = split_per_turn(traj)
    assert [s.prompt_ids for s in samples] == [call[0] for call in model.calls]
    assert [detokenize(s.response_ids) for s in samples] == [TURN_1, TURN_2, TURN_3]


def test_turn_rows_follow_the_recorded_inputs_and_spans() -> None:
    traj, model = run("last_exchange")
    row = traj.to_row()
    assert has_rewritten_contexts([row]) and not has_rewritten_contexts([{"turn_contexts": []}])
    rows = split_turn_rows([PROMPT], [row["response_ids"]], [row["logprobs"]], [row])
    assert rows.prompt_ids == [call[0] for call in model.calls]
    assert [detokenize(r) for r in rows.response_ids] == [TURN_1, TURN_2, TURN_3]
    assert rows.logprobs == [[-0.1] * len(TURN_1), [-0.2] * len(TURN_2), [-0.3] * len(TURN_3)]
    assert rows.source == [0, 0, 0]
    assert [hi - lo for lo, hi in rows.spans] == [len(TURN_1), len(TURN_2), len(TURN_3)]
    with pytest.raises(ValueError, match="one prompt, response, log-prob list and summary"):
        split_turn_rows([PROMPT], [], [row["logprobs"]], [row])
    bad = {**row, "turn_spans": [[0, 10_000, 1]]}
    with pytest.raises(ValueError, match="turn 0 spans tokens 0:10000"):
        split_turn_rows([PROMPT], [row["response_ids"]], [row["logprobs"]], [bad])


def test_context_registry_and_extension() -> None:
    assert {"append", "last_exchange"} <= set(AGENT_CONTEXTS.names())
    with pytest.raises(RegistryError, match="unknown agent context 'summary'"):
        get_agent_context("summary")

    @api.register_agent_context("test_prompt_only", force=True)
    def prompt_only(traj):
        return list(traj.prompt_ids)

    traj, model = run("test_prompt_only")
    assert all(call[0] == PROMPT for call in model.calls)
    assert sorted(traj.turn_contexts) == [2, 4]


def test_config_names_the_context_and_refuses_what_per_turn_rows_cannot_train() -> None:
    base = ["model.model_type=hf_causal_lm", "model.tiny_init=true", "model.model_path=/tmp/x"]
    base += ["reward.reward_type=format"]
    agent = [*base, "agent.loop=tool_loop", "algorithm.adv_type=grpo"]
    assert load_config(overrides=[*agent, "agent.context=last_exchange"]).agent.context == (
        "last_exchange"
    )
    with pytest.raises(ConfigError, match="agent.context.*unknown agent context 'summary'"):
        load_config(overrides=[*agent, "agent.context=summary"])
    with pytest.raises(ConfigError, match="a critic cannot give"):
        load_config(
            overrides=[
                *base,
                "agent.loop=tool_loop",
                "agent.context=last_exchange",
                "algorithm.adv_type=token_gae",
                "model.value_head=true",
            ]
        )
    with pytest.raises(ConfigError, match="kl_in_reward"):
        load_config(
            overrides=[
                *agent,
                "agent.context=last_exchange",
                "algorithm.kl_coef=0.01",
                "algorithm.kl_in_reward=true",
            ]
        )
