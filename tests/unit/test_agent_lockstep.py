"""Many agent loops at once (``run_lockstep``): batched rounds, order, determinism, errors."""

from __future__ import annotations

import random
import threading
import time

import pytest

from rl_core.agents.lockstep import GenerationRequest, run_lockstep
from rl_core.agents.loops import Generation, LoopSettings, get_agent_loop
from rl_core.agents.outcomes import Outcome
from rl_core.agents.tools import TOOLS, FunctionTool
from rl_core.agents.trajectory import Budget


def tokenize(text: str) -> list[int]:
    return list(text.encode())


def detokenize(ids) -> str:
    return bytes(ids).decode(errors="replace")


class Scripted:
    """A fake engine: prompt ``i`` asks the calculator ``calls[i]`` times, then answers.

    It records every round's requests, and its output depends only on the context (as a
    seeded engine's would), so reruns must give identical trajectories.
    """

    def __init__(self, calls: list[int]) -> None:
        self.calls = calls
        self.rounds: list[list[GenerationRequest]] = []
        self.lock = threading.Lock()

    def __call__(self, requests: list[GenerationRequest], round_index: int) -> list[Generation]:
        assert threading.current_thread() is threading.main_thread()
        self.rounds.append(list(requests))
        out = []
        for request in requests:
            text = detokenize(request.context_ids)
            prompt = int(text.split("|")[0])
            done = text.count("<result>")
            if done < self.calls[prompt]:
                new = f"<call>calculator: {prompt}*{done + 2}</call>"
                why = "stop"
            else:
                new = f"#### {prompt}"
                why = "eos"
            ids = tokenize(new)
            out.append(Generation(ids, [-0.5] * len(ids), 7, why))
        return out


def settings(**budget) -> LoopSettings:
    return LoopSettings(parser="xml", tools=("calculator",), budget=Budget(**budget))


def run(engine: Scripted, n: int, loop: str = "tool_loop", **budget):
    prompts = [tokenize(f"{i}|") for i in range(n)]
    return run_lockstep(
        get_agent_loop(loop), prompts, settings(**budget), engine, tokenize, detokenize
    )


def test_rounds_batch_every_trajectory_that_has_that_turn_in_prompt_order():
    engine = Scripted(calls=[0, 2, 1, 3, 0, 1])
    trajectories = run(engine, 6)
    sizes = [len(r) for r in engine.rounds]
    assert sizes == [6, 4, 2, 1]  # round r: the prompts with at least r calls
    # every round lists its trajectories in prompt order
    for requests in engine.rounds:
        firsts = [int(detokenize(r.context_ids).split("|")[0]) for r in requests]
        assert firsts == sorted(firsts)
    assert [t.num_tool_calls for t in trajectories] == [0, 2, 1, 3, 0, 1]
    assert [t.num_turns for t in trajectories] == [1, 3, 2, 4, 1, 2]
    assert all(t.finish_reason == "eos" for t in trajectories)
    text = detokenize(trajectories[3].response_ids)
    assert text.count("<result>") == 3 and "<result>9</result>" in text  # 3*3
    assert trajectories[3].tool_calls[0].outcome is Outcome.OK


def test_each_turn_starts_with_the_previous_turns_exact_tokens():
    engine = Scripted(calls=[3, 1])
    trajectories = run(engine, 2)
    contexts: dict[int, list[list[int]]] = {}
    for requests in engine.rounds:
        for r in requests:
            contexts.setdefault(int(detokenize(r.context_ids).split("|")[0]), []).append(
                r.context_ids
            )
    for prompt, seen in contexts.items():
        for earlier, later in zip(seen, seen[1:], strict=False):
            assert later[: len(earlier)] == earlier  # append-only, never re-tokenized
        traj = trajectories[prompt]
        assert seen[-1] == traj.context_ids()[: len(seen[-1])]
        # what the trajectory holds after the last request is exactly the last generation
        assert traj.context_ids()[len(seen[-1]) :] == tokenize(f"#### {prompt}")


def test_slow_tools_in_threads_do_not_change_the_trajectories():
    delays = random.Random(0)

    def slow_double(arguments: str) -> str:
        time.sleep(delays.random() * 0.02)
        return str(2 * int(arguments.split("*")[0]))

    original = TOOLS.get("calculator")
    TOOLS.register("calculator", FunctionTool("calculator", slow_double), force=True)
    try:
        first = [t.to_row() for t in run(Scripted([2, 0, 3, 1, 2, 1, 0, 3]), 8)]
        again = [t.to_row() for t in run(Scripted([2, 0, 3, 1, 2, 1, 0, 3]), 8)]
    finally:
        TOOLS.register("calculator", original, force=True)
    volatile = ("tool_calls", "generation_times")  # latencies and wall-clock times
    strip = [{k: v for k, v in r.items() if k not in volatile} for r in first]
    assert strip == [{k: v for k, v in r.items() if k not in volatile} for r in again]
    assert [c["outcome"] for r in first for c in r["tool_calls"]] == ["ok"] * 12


def test_budgets_end_trajectories_and_the_rest_go_on():
    engine = Scripted(calls=[5, 1])
    short, normal = run(engine, 2, max_turns=3)
    assert short.finish_reason == "max_turns" and short.num_turns == 3
    assert normal.finish_reason == "eos"


def test_a_failing_loop_is_reported_with_its_prompt_after_the_others_end():
    calls = []

    def broken(prompt_ids, io, settings):
        if detokenize(prompt_ids).startswith("1|"):
            raise ValueError("boom")
        calls.append(prompt_ids)
        return get_agent_loop("tool_loop")(prompt_ids, io, settings)

    prompts = [tokenize(f"{i}|") for i in range(3)]
    with pytest.raises(RuntimeError, match="agent loop failed on prompt 1: ValueError"):
        run_lockstep(broken, prompts, settings(), Scripted([1, 1, 1]), tokenize, detokenize)
    assert len(calls) == 2  # the other loops ran to their end


def test_a_failing_generation_stops_every_loop_and_is_raised():
    def failing(requests, round_index):
        if round_index == 1:
            raise OSError("engine died")
        return Scripted([2, 2, 2])(requests, round_index)

    prompts = [tokenize(f"{i}|") for i in range(3)]
    before = threading.active_count()
    with pytest.raises(OSError, match="engine died"):
        run_lockstep(
            get_agent_loop("tool_loop"), prompts, settings(), failing, tokenize, detokenize
        )
    assert threading.active_count() == before  # no loop thread left behind


def test_no_prompts_no_rounds():
    engine = Scripted([])
    assert run(engine, 0) == [] and engine.rounds == []
