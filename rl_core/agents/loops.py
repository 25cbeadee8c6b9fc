"""Agent loops: how one prompt becomes a (multi-turn) :class:`Trajectory`, engine-free.

An agent loop is a function ``loop(prompt_ids, io, settings) -> Trajectory`` registered in
:data:`AGENT_LOOPS`. It talks to the model only through :class:`ModelIO`:

* ``io.generate(context_ids, stop, max_new_tokens)`` returns a :class:`Generation`
  (or the tuple ``(ids, logprobs, version, finish_reason)``). ``finish_reason`` is
  ``"eos"`` (the model ended its answer), ``"stop"`` (a stop string was produced) or
  ``"length"`` (``max_new_tokens`` reached). The tokens of a stop string are part of the
  returned ids, with their log-probabilities: the model sampled them.
* ``io.tokenize(text)`` and ``io.detokenize(ids)`` convert text (no special tokens added).

Token exactness: the model's tokens are kept as ids and each generation's input is the
previous input plus those ids plus the tool result's ids (or, with a context builder that
rewrites the history, ids it selects: :mod:`rl_core.agents.context`), so nothing the model
produced is ever re-tokenized. Text is only decoded to find a call, and only **new** text (the formatted
tool result) is tokenized. Tokenizing that text alone may split it differently than
tokenizing the whole conversation would (a BPE merge across the boundary between the call's
last token and the result's first character), and a stop string may end inside a token (the
whole token is kept, so the decoded turn may run a few characters past the marker): both are
harmless because training scores exactly the ids the engine saw.

Built-ins: ``single_turn`` (one generation, no tools) and ``tool_loop`` (generate, run the
called tool, append its result, repeat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rl_core.agents.context import APPEND, next_context
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.parsers import ParseError, ToolCall, get_tool_parser
from rl_core.agents.tools import run_tool
from rl_core.agents.trajectory import (
    Budget,
    ToolCallRecord,
    Trajectory,
    budget_stop,
    new_token_allowance,
    tokens_left,
)
from rl_core.registry import Registry

logger = logging.getLogger(__name__)

#: ``Generation.finish_reason`` values.
FINISH_EOS, FINISH_STOP, FINISH_LENGTH = "eos", "stop", "length"


class Generation(NamedTuple):
    """What one generation produced.

    Attributes:
        ids: The new tokens (a stop string's tokens included).
        logprobs: Their sampling log-probabilities.
        version: The weight version that sampled them.
        finish_reason: ``"eos"``, ``"stop"`` or ``"length"``.
    """

    ids: list[int]
    logprobs: list[float]
    version: int
    finish_reason: str


GenerateFn = Callable[[list[int], tuple[str, ...], int], Any]


@dataclass(frozen=True)
class ModelIO:
    """The model as an agent loop sees it (see the module docstring).

    Attributes:
        generate: ``generate(context_ids, stop, max_new_tokens) -> Generation``.
        tokenize: ``tokenize(text) -> ids``, without special tokens added.
        detokenize: ``detokenize(ids) -> text``.
    """

    generate: GenerateFn
    tokenize: Callable[[str], list[int]]
    detokenize: Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class LoopSettings:
    """How an agent loop runs an episode.

    Attributes:
        parser: Name of the tool-call syntax in ``TOOL_PARSERS``.
        tools: The tools the model may call (None: every registered tool).
        budget: Turn and token limits.
        tool_retries: Extra attempts of a tool call that failed through the machinery.
        context: Name of the context builder in ``AGENT_CONTEXTS``: what each generation
            is given (``append``: the whole episode so far).
    """

    parser: str = "xml"
    tools: tuple[str, ...] | None = None
    budget: Budget = field(default_factory=Budget)
    tool_retries: int = 2
    context: str = APPEND


AgentLoop = Callable[[list[int], ModelIO, LoopSettings], Trajectory]

#: Loop name → ``loop(prompt_ids, io, settings) -> Trajectory``.
AGENT_LOOPS: Registry[AgentLoop] = Registry("agent loop")


def register_agent_loop(name: str, loop: AgentLoop | None = None, *, force: bool = False) -> Any:
    """Register an agent loop (call or decorator form).

    Args:
        name: The loop's name (case-insensitive).
        loop: ``loop(prompt_ids, io, settings) -> Trajectory``; omit it to get a decorator.
        force: Replace an existing registration.

    Returns:
        ``loop`` when given, otherwise a decorator registering its argument.

    Raises:
        rl_core.registry.RegistryError: ``name`` is taken and ``force`` is False.
    """
    if loop is None:
        return AGENT_LOOPS.decorator(name, force=force)
    return AGENT_LOOPS.register(name, loop, force=force)


def get_agent_loop(name: str) -> AgentLoop:
    """The loop registered as ``name`` (the error of an unknown one lists the known ones)."""
    return AGENT_LOOPS.get(name)


def _generate(io: ModelIO, context: list[int], stop: tuple[str, ...], limit: int) -> Generation:
    out = io.generate(context, stop, limit)
    return out if isinstance(out, Generation) else Generation(*out)


@register_agent_loop("single_turn")
def single_turn(prompt_ids: list[int], io: ModelIO, settings: LoopSettings) -> Trajectory:
    """One generation without tools (the behaviour of single-turn reasoning RL)."""
    traj = Trajectory(prompt_ids=list(prompt_ids))
    stopped = budget_stop(traj, settings.budget)
    if stopped:
        traj.finish_reason = stopped
        return traj
    context = next_context(settings.context, traj)
    gen = _generate(io, context, (), new_token_allowance(traj, settings.budget))
    traj.add_model_tokens(gen.ids, gen.logprobs, gen.version, gen.finish_reason)
    traj.finish_reason = gen.finish_reason
    return traj


@register_agent_loop("tool_loop")
def tool_loop(prompt_ids: list[int], io: ModelIO, settings: LoopSettings) -> Trajectory:
    """Generate until a call's end marker or EOS; run the call; append its result; repeat.

    The episode ends (``finish_reason``) at

    * ``"eos"``: the model ended its answer (a call in that turn is not run);
    * ``"no_call"``: the turn stopped without a complete call; ``"length"`` when it was cut
      at ``budget.max_new_tokens``;
    * ``"max_turns"``, ``"max_tokens"``: the budget is spent (a turn cut by the context's
      limit, a call made when no further turn may start, which is not run, or a tool result
      cut to the room left);
    * ``"infra_failure"``: a tool call still failed through the machinery after
      ``settings.tool_retries`` retries (its result is appended; no further turn runs).

    A call that does not parse or names an unknown tool gets the error as its result, and
    the model goes on.
    """
    parser = get_tool_parser(settings.parser)
    budget = settings.budget
    traj = Trajectory(prompt_ids=list(prompt_ids))
    while True:
        stopped = budget_stop(traj, budget)
        if stopped:
            traj.finish_reason = stopped
            return traj
        context = next_context(settings.context, traj)
        gen = _generate(io, context, parser.stop, new_token_allowance(traj, budget))
        traj.add_model_tokens(gen.ids, gen.logprobs, gen.version, gen.finish_reason)
        if gen.finish_reason == FINISH_EOS:
            traj.finish_reason = FINISH_EOS
            return traj
        call = parser.parse(io.detokenize(gen.ids))
        if call is None:
            traj.finish_reason = "no_call"
            if gen.finish_reason == FINISH_LENGTH:  # cut by the turn's or the context's limit
                traj.finish_reason = "max_tokens" if not tokens_left(traj, budget) else "length"
            return traj
        stopped = budget_stop(traj, budget)
        if stopped:  # the model could not read the result: do not run the call
            traj.finish_reason = stopped
            return traj
        result = _call(traj, call, settings)
        ids = io.tokenize(parser.format_result(result))
        room = tokens_left(traj, budget)
        traj.add_tool_tokens(ids[:room])
        if result.outcome is Outcome.INFRA_FAILURE:
            traj.finish_reason = "infra_failure"
            return traj
        if len(ids) > room:
            traj.finish_reason = "max_tokens"
            return traj


def _call(traj: Trajectory, call: ToolCall | ParseError, settings: LoopSettings) -> ToolResult:
    """Run ``call`` (retrying infrastructure failures) and record it in ``traj``."""
    turn = len(traj.turns) - 1
    if isinstance(call, ParseError):
        result = ToolResult(Outcome.MODEL_FAILURE, f"error: {call.message}", 0.0, call.message)
        traj.record_tool_call(
            ToolCallRecord("", call.text, result.outcome, 0.0, call.message, turn)
        )
        return result
    latency, attempts = 0.0, 0
    while True:
        attempts += 1
        result = run_tool(call.name, call.arguments, allowed=settings.tools)
        latency += result.latency_s
        if result.outcome is not Outcome.INFRA_FAILURE or attempts > settings.tool_retries:
            break
        logger.info("tool %r: infrastructure failure (%s), retrying", call.name, result.detail)
    traj.record_tool_call(
        ToolCallRecord(
            call.name, call.arguments, result.outcome, latency, result.detail, turn, attempts
        )
    )
    return result
