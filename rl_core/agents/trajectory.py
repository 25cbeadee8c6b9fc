"""The token-level record of a multi-turn episode, built turn by turn, append-only.

A :class:`Trajectory` holds the prompt's token ids and one flat response: the model's
tokens (trained on: loss mask 1, with their sampling log-probabilities and the weight
version that sampled them) interleaved with the tokens of tool results (loss mask 0,
log-probability 0.0, version -1). The input of each generation is :meth:`Trajectory.context_ids`:
the previous input, the tokens the model produced and the tool result's tokens, as ids,
never decoded and re-tokenized, so the trainer scores exactly the sequence the engine saw.

When the context is not append-only (``agent.context`` rewrites earlier turns, see
:mod:`rl_core.agents.context`), the input of each model turn it changed is kept in
:attr:`Trajectory.turn_contexts`, and :func:`split_per_turn` makes one sample per model turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rl_core.agents.outcomes import Outcome

#: Role of a model turn and of a tool turn in :attr:`Turn.role`.
MODEL, TOOL = "model", "tool"
#: Version recorded for tokens no model sampled.
NO_VERSION = -1


@dataclass(frozen=True)
class Turn:
    """One segment of the response.

    Attributes:
        role: :data:`MODEL` or :data:`TOOL`.
        start: Offset of its first token in ``response_ids``.
        end: Offset just past its last token.
        finish_reason: Why the generation of a model turn ended (``"eos"``, ``"stop"``,
            ``"length"``); empty for a tool turn.
    """

    role: str
    start: int
    end: int
    finish_reason: str = ""


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of the episode, for statistics and traces.

    Attributes:
        name: The tool named in the call (empty when the call did not parse).
        arguments: Its arguments (the raw call text when it did not parse).
        outcome: How the last attempt ended.
        latency_s: Seconds of all attempts together.
        detail: Why it ended so.
        turn: Index in ``turns`` of the model turn that made the call.
        attempts: Attempts made (infrastructure failures are retried).
    """

    name: str
    arguments: str
    outcome: Outcome
    latency_s: float
    detail: str
    turn: int
    attempts: int = 1


@dataclass
class Trajectory:
    """A multi-turn episode at the token level (see the module docstring).

    Attributes:
        prompt_ids: The prompt's tokens.
        response_ids: Every token after the prompt, model and tool tokens interleaved.
        loss_mask: 1 where the model sampled the token, 0 where it was appended.
        logprobs: The sampling log-probability of each model token, 0.0 elsewhere.
        versions: The weight version that sampled each token, -1 for appended ones.
        turns: The segments of the response, in order.
        tool_calls: The tool calls, in order.
        finish_reason: Why the episode ended (set by the agent loop).
        generation_times: ``(asked, answered)`` wall-clock seconds of each generation as the
            trajectory saw it (set by the runner, e.g.
            :func:`~rl_core.agents.lockstep.run_lockstep`; empty when unknown).
        turn_contexts: Index in ``turns`` of a model turn → the input ids it was generated
            from, for the turns whose input was not the append-only context (prompt and
            response before it). Empty with ``agent.context: append``.
    """

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    finish_reason: str = ""
    generation_times: list[tuple[float, float]] = field(default_factory=list)
    turn_contexts: dict[int, list[int]] = field(default_factory=dict)

    def add_model_tokens(
        self,
        ids: Sequence[int],
        logprobs: Sequence[float],
        version: int,
        finish_reason: str = "",
    ) -> Turn:
        """Append a model turn (loss mask 1).

        Raises:
            ValueError: ``logprobs`` does not have one value per token.
        """
        if len(ids) != len(logprobs):
            raise ValueError(
                f"a model turn needs one log-probability per token: {len(ids)} tokens, "
                f"{len(logprobs)} log-probabilities"
            )
        return self._append(MODEL, ids, 1, list(map(float, logprobs)), int(version), finish_reason)

    def add_tool_tokens(self, ids: Sequence[int]) -> Turn:
        """Append a tool turn (loss mask 0, log-probability 0.0, version -1)."""
        return self._append(TOOL, ids, 0, [0.0] * len(ids), NO_VERSION, "")

    def record_tool_call(self, record: ToolCallRecord) -> None:
        """Record a tool call (its tokens are added with :meth:`add_tool_tokens`)."""
        self.tool_calls.append(record)

    def _append(
        self,
        role: str,
        ids: Sequence[int],
        mask: int,
        logprobs: list[float],
        version: int,
        why: str,
    ) -> Turn:
        start = len(self.response_ids)
        self.response_ids.extend(int(i) for i in ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs)
        self.versions.extend([version] * len(ids))
        turn = Turn(role, start, len(self.response_ids), why)
        self.turns.append(turn)
        return turn

    def context_ids(self) -> list[int]:
        """Prompt and response so far: the input of the next generation."""
        return [*self.prompt_ids, *self.response_ids]

    @property
    def num_tokens(self) -> int:
        """Prompt and response tokens."""
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def num_turns(self) -> int:
        """Model turns (generations)."""
        return sum(turn.role == MODEL for turn in self.turns)

    @property
    def num_tool_calls(self) -> int:
        """Tool calls, malformed ones included."""
        return len(self.tool_calls)

    @property
    def masked_fraction(self) -> float:
        """Fraction of the response not trained on (tool tokens); 0.0 for an empty one."""
        if not self.response_ids:
            return 0.0
        return 1.0 - sum(self.loss_mask) / len(self.response_ids)

    @property
    def infra_failed(self) -> bool:
        """Whether a tool call still failed through the machinery's fault after its retries."""
        return any(call.outcome is Outcome.INFRA_FAILURE for call in self.tool_calls)

    def to_row(self) -> dict[str, Any]:
        """Plain lists and numbers for training: the token fields, turn spans and counts."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "response_ids": list(self.response_ids),
            "loss_mask": list(self.loss_mask),
            "logprobs": list(self.logprobs),
            "versions": list(self.versions),
            "turn_spans": [[t.start, t.end, int(t.role == MODEL)] for t in self.turns],
            "num_turns": self.num_turns,
            "num_tool_calls": self.num_tool_calls,
            "masked_fraction": self.masked_fraction,
            "infra_failed": self.infra_failed,
            "finish_reason": self.finish_reason,
            "generation_times": [list(t) for t in self.generation_times],
            "turn_contexts": [
                [turn, list(ids)] for turn, ids in sorted(self.turn_contexts.items())
            ],
            "tool_calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "outcome": c.outcome.value,
                    "latency_s": c.latency_s,
                    "detail": c.detail,
                    "turn": c.turn,
                    "attempts": c.attempts,
                }
                for c in self.tool_calls
            ],
        }


def split_per_turn(traj: Trajectory) -> list[Trajectory]:
    """One single-turn sample per non-empty model turn (for contexts that are not append-only).

    Each sample's prompt is the input its turn was generated from: the recorded one
    (:attr:`Trajectory.turn_contexts`), else everything before the turn (prompt, earlier
    model and tool tokens); its response is that turn only. Give every sample the episode's
    advantage (:mod:`rl_core.agents.per_turn` does, for a batch).
    """
    samples = []
    for index, turn in enumerate(traj.turns):
        if turn.role != MODEL or turn.start == turn.end:
            continue
        context = traj.turn_contexts.get(index)
        if context is None:
            context = [*traj.prompt_ids, *traj.response_ids[: turn.start]]
        sample = Trajectory(prompt_ids=list(context))
        span = slice(turn.start, turn.end)
        versions = traj.versions[span]
        sample.add_model_tokens(traj.response_ids[span], traj.logprobs[span], 0, turn.finish_reason)
        sample.versions = versions  # a turn keeps the version of each of its tokens
        sample.finish_reason = traj.finish_reason
        samples.append(sample)
    return samples


@dataclass(frozen=True)
class Budget:
    """The limits of one episode.

    Attributes:
        max_turns: Most model turns (generations).
        max_total_tokens: Most tokens of prompt and response together (the context).
        max_new_tokens: Most tokens of one model turn.
    """

    max_turns: int = 8
    max_total_tokens: int = 4096
    max_new_tokens: int = 1024

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_total_tokens", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"Budget.{name} must be at least 1, got {getattr(self, name)}")


def budget_stop(traj: Trajectory, budget: Budget) -> str | None:
    """Why no further model turn may start (``"max_turns"``, ``"max_tokens"``), or None."""
    if traj.num_turns >= budget.max_turns:
        return "max_turns"
    if traj.num_tokens >= budget.max_total_tokens:
        return "max_tokens"
    return None


def tokens_left(traj: Trajectory, budget: Budget) -> int:
    """Tokens the context may still grow by (0 when full)."""
    return max(0, budget.max_total_tokens - traj.num_tokens)


def new_token_allowance(traj: Trajectory, budget: Budget) -> int:
    """``max_new_tokens`` of the next generation: the per-turn limit or what the context has left."""
    return min(budget.max_new_tokens, tokens_left(traj, budget))


def trace_tokens(trace: Sequence[Sequence[str]], tokenize: Any) -> tuple[list[int], list[int]]:
    """Token ids and loss mask of a supervised trace, for a warm start on tool use.

    A trace is a list of ``[text, role]`` segments, role :data:`MODEL` (trained on: mask 1)
    or :data:`TOOL` (a tool's output: mask 0). Each segment is tokenized on its own, as an
    agent loop appends a tool result's tokens to the model's.

    Args:
        trace: The segments, in order.
        tokenize: ``tokenize(text) -> ids`` without special tokens.

    Raises:
        ValueError: A segment is not ``[text, role]`` with a known role.
    """
    ids: list[int] = []
    mask: list[int] = []
    for segment in trace:
        if len(segment) != 2 or segment[1] not in (MODEL, TOOL) or not isinstance(segment[0], str):
            raise ValueError(
                f"a trace segment must be [text, {MODEL!r} or {TOOL!r}], got {segment!r}"
            )
        text, role = segment
        new = list(tokenize(text))
        ids.extend(new)
        mask.extend([int(role == MODEL)] * len(new))
    return ids, mask
