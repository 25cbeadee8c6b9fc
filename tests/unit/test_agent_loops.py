"""Agent loops with a scripted model and a character-level tokenizer (one id per character)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rl_core import api
from rl_core.agents.loops import (
    AGENT_LOOPS,
    Generation,
    LoopSettings,
    ModelIO,
    get_agent_loop,
)
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.trajectory import MODEL, TOOL, Budget, Trajectory, split_per_turn
from rl_core.registry import RegistryError


def tokenize(text: str) -> list[int]:
    return [ord(c) for c in text]


def detokenize(ids: Sequence[int]) -> str:
    return "".join(map(chr, ids))


class ScriptedModel:
    """Returns the scripted turns in order; records every call's input.

    A turn is ``(text, finish_reason)``; its log-probabilities are ``-(k + 1) / 10`` for turn
    k and its version ``100 + k``. A turn longer than ``max_new_tokens`` is cut ("length").
    """

    def __init__(self, turns: list[tuple[str, str]], as_tuple: bool = False) -> None:
        self.turns = turns
        self.as_tuple = as_tuple
        self.calls: list[tuple[list[int], tuple[str, ...], int]] = []

    def __call__(self, context: list[int], stop: tuple[str, ...], max_new_tokens: int):
        k = len(self.calls)
        self.calls.append((list(context), stop, max_new_tokens))
        text, reason = self.turns[k]
        if len(text) > max_new_tokens:
            text, reason = text[:max_new_tokens], "length"
        ids = tokenize(text)
        out = (ids, [-(k + 1) / 10] * len(ids), 100 + k, reason)
        return out if self.as_tuple else Generation(*out)

    def io(self) -> ModelIO:
        return ModelIO(generate=self, tokenize=tokenize, detokenize=detokenize)


PROMPT = tokenize("Q: 123*456+1? A: ")
TURN_1 = "Let me compute. <call>calculator: 123*456</call>"
TURN_2 = "Now add one. <call>calculator: 56088+1</call>"
TURN_3 = "56089"


@pytest.fixture(autouse=True)
def isolated(clean_registries):
    """Registrations of a test do not leak into the next one."""
    yield


def _run(turns, loop="tool_loop", **settings) -> tuple[Trajectory, ScriptedModel]:
    model = ScriptedModel(turns)
    traj = get_agent_loop(loop)(PROMPT, model.io(), LoopSettings(**settings))
    return traj, model


def _segments(traj: Trajectory) -> list[tuple[str, str]]:
    return [(t.role, detokenize(traj.response_ids[t.start : t.end])) for t in traj.turns]


def test_tool_loop_runs_calls_and_appends_results() -> None:
    traj, model = _run([(TURN_1, "stop"), (TURN_2, "stop"), (TURN_3, "eos")])
    assert _segments(traj) == [
        (MODEL, TURN_1),
        (TOOL, "<result>56088</result>"),
        (MODEL, TURN_2),
        (TOOL, "<result>56089</result>"),
        (MODEL, TURN_3),
    ]
    assert traj.finish_reason == "eos" and traj.num_turns == 3 and not traj.infra_failed
    assert [(c.name, c.arguments, c.outcome, c.turn) for c in traj.tool_calls] == [
        ("calculator", "123*456", Outcome.OK, 0),
        ("calculator", "56088+1", Outcome.OK, 2),
    ]
    assert all(stop == ("</call>",) for _, stop, _ in model.calls)
    # loss mask, log-probabilities and versions follow the segments
    for k, turn in enumerate(t for t in traj.turns if t.role == MODEL):
        span = slice(turn.start, turn.end)
        assert set(traj.loss_mask[span]) == {1}
        assert set(traj.logprobs[span]) == {-(k + 1) / 10}
        assert set(traj.versions[span]) == {100 + k}
    for turn in (t for t in traj.turns if t.role == TOOL):
        span = slice(turn.start, turn.end)
        assert set(traj.loss_mask[span]) == {0} and set(traj.logprobs[span]) == {0.0}
        assert set(traj.versions[span]) == {-1}


def test_each_generation_input_extends_the_previous_one_exactly() -> None:
    traj, model = _run([(TURN_1, "stop"), (TURN_2, "stop"), (TURN_3, "eos")])
    contexts = [context for context, _, _ in model.calls]
    assert contexts[0] == PROMPT
    model_turns = [t for t in traj.turns if t.role == MODEL]
    for k in range(1, len(contexts)):
        generated = traj.response_ids[model_turns[k - 1].start : model_turns[k - 1].end]
        assert contexts[k][: len(contexts[k - 1])] == contexts[k - 1]
        assert contexts[k][len(contexts[k - 1]) :][: len(generated)] == generated
    assert traj.context_ids()[: len(contexts[-1])] == contexts[-1]


def test_stop_string_tokens_are_model_tokens() -> None:
    traj, _ = _run([(TURN_1, "stop"), ("done", "eos")])
    first = traj.turns[0]
    assert detokenize(traj.response_ids[first.end - len("</call>") : first.end]) == "</call>"
    assert traj.loss_mask[first.end - 1] == 1 and traj.logprobs[first.end - 1] == -0.1


def test_malformed_call_and_unknown_tool_are_answered_and_the_model_goes_on() -> None:
    turns = [("<call>123*456</call>", "stop"), ("<call>calc: 1</call>", "stop"), ("ok", "eos")]
    traj, _ = _run(turns)
    assert [(c.name, c.outcome) for c in traj.tool_calls] == [
        ("", Outcome.MODEL_FAILURE),
        ("calc", Outcome.MODEL_FAILURE),
    ]
    tool_texts = [text for role, text in _segments(traj) if role == TOOL]
    assert tool_texts[0].startswith("<result>error: malformed call")
    assert tool_texts[1] == "<result>unknown tool 'calc'; registered: calculator, python</result>"
    assert traj.finish_reason == "eos" and not traj.infra_failed


def test_allowed_tools_limit_what_the_model_may_call() -> None:
    traj, _ = _run([("<call>python: print(1)</call>", "stop"), ("x", "eos")], tools=("calculator",))
    assert traj.tool_calls[0].outcome is Outcome.MODEL_FAILURE
    assert "registered: calculator</result>" in _segments(traj)[1][1]


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        ([("The answer is 3", "stop")], "no_call"),  # stopped without a call
        ([("The answer is 3", "length")], "length"),
        ([("<call>calculator: 1+1</call>", "eos")], "eos"),  # EOS ends it, call or not
    ],
)
def test_episode_ends_without_a_call(turns, reason) -> None:
    traj, _ = _run(turns)
    assert traj.finish_reason == reason and traj.num_turns == 1 and traj.num_tool_calls == 0


def test_infrastructure_failures_are_retried_then_marked() -> None:
    attempts: list[str] = []

    @api.register_tool("test_flaky")
    def flaky(arguments: str) -> ToolResult:
        attempts.append(arguments)
        if len(attempts) < int(arguments):
            return ToolResult(Outcome.INFRA_FAILURE, "sandbox crashed", detail="crash")
        return ToolResult(Outcome.OK, "fine")

    traj, _ = _run([("<call>test_flaky: 3</call>", "stop"), ("ok", "eos")], tool_retries=2)
    (call,) = traj.tool_calls
    assert (call.outcome, call.attempts, traj.finish_reason) == (Outcome.OK, 3, "eos")
    assert not traj.infra_failed

    attempts.clear()
    traj, model = _run([("<call>test_flaky: 9</call>", "stop"), ("never", "eos")], tool_retries=2)
    (call,) = traj.tool_calls
    assert (call.outcome, call.attempts, call.detail) == (Outcome.INFRA_FAILURE, 3, "crash")
    assert traj.infra_failed and traj.finish_reason == "infra_failure"
    assert len(model.calls) == 1  # no generation after a failed machine
    assert _segments(traj)[-1] == (TOOL, "<result>sandbox crashed</result>")


def test_a_raising_tool_is_retried_as_an_infrastructure_failure() -> None:
    api.register_tool("test_raises", lambda arguments: 1 / 0)
    traj, _ = _run([("<call>test_raises: x</call>", "stop")], tool_retries=1)
    (call,) = traj.tool_calls
    assert call.attempts == 2 and call.detail == "ZeroDivisionError: division by zero"
    assert traj.infra_failed


def test_turn_budget_does_not_run_a_call_the_model_cannot_read() -> None:
    calls = [("<call>calculator: 1+1</call>", "stop")] * 3
    traj, model = _run(calls, budget=Budget(max_turns=2))
    assert traj.num_turns == 2 and traj.num_tool_calls == 1 and len(model.calls) == 2
    assert traj.turns[-1].role == MODEL and traj.finish_reason == "max_turns"


def test_token_budget_limits_generations_and_cuts_results() -> None:
    call = "<call>calculator: 2**300</call>"  # the 91-digit result does not fit
    budget = Budget(max_total_tokens=len(PROMPT) + len(call) + 40, max_new_tokens=len(call))
    traj, model = _run([(call, "stop"), ("x", "eos")], budget=budget)
    assert model.calls[0][2] == len(call)
    assert traj.num_tokens == budget.max_total_tokens and traj.finish_reason == "max_tokens"
    assert _segments(traj)[1] == (TOOL, f"<result>{2**300}"[:40])

    budget = Budget(max_total_tokens=len(PROMPT) + 10, max_new_tokens=50)
    traj, model = _run([(call, "stop")], budget=budget)
    assert model.calls[0][2] == 10  # the context's room, below the per-turn limit
    assert traj.finish_reason == "max_tokens" and traj.num_tool_calls == 0


def test_single_turn_is_one_generation_without_stop_strings() -> None:
    traj, model = _run([(TURN_1, "eos")], loop="single_turn", budget=Budget(max_new_tokens=7))
    assert model.calls == [(PROMPT, (), 7)]
    assert detokenize(traj.response_ids) == TURN_1[:7] and traj.finish_reason == "length"
    assert traj.num_tool_calls == 0 and traj.loss_mask == [1] * 7


def test_generate_may_return_a_plain_tuple_and_split_per_turn_follows() -> None:
    model = ScriptedModel([(TURN_1, "stop"), (TURN_3, "eos")], as_tuple=True)
    traj = get_agent_loop("tool_loop")(PROMPT, model.io(), LoopSettings())
    samples = split_per_turn(traj)
    assert [detokenize(s.response_ids) for s in samples] == [TURN_1, TURN_3]
    assert samples[1].prompt_ids == model.calls[1][0]  # the exact input of that generation


def test_json_parser_loop() -> None:
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    traj, model = _run([(call, "stop"), ("42", "eos")], parser="json")
    assert model.calls[0][1] == ("</tool_call>",)
    assert _segments(traj)[1] == (TOOL, "<tool_response>\n42\n</tool_response>\n")


def test_loop_registry() -> None:
    assert {"single_turn", "tool_loop"} <= set(AGENT_LOOPS.names())
    with pytest.raises(RegistryError, match="unknown agent loop 'react'; known: single_turn"):
        get_agent_loop("react")
    with pytest.raises(RegistryError, match="unknown tool parser 'yaml'"):
        _run([("x", "eos")], parser="yaml")

    @api.register_agent_loop("test_echo_loop")
    def echo(prompt_ids, io, settings) -> Trajectory:
        traj = Trajectory(prompt_ids=list(prompt_ids))
        traj.add_model_tokens(io.tokenize("echo"), [0.0] * 4, version=0, finish_reason="eos")
        return traj

    traj, model = _run([], loop="test_echo_loop")
    assert detokenize(traj.response_ids) == "echo" and model.calls == []
