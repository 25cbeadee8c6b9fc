"""One training sample per model turn, for trajectories whose context was rewritten.

With an ``agent.context`` that is not append-only (:mod:`rl_core.agents.context`), a
trajectory's model turns were generated from inputs that are not prefixes of its flat
response, so the flat row cannot be scored as one sequence. Each model turn becomes a row of
its own: the input it was generated from, then its tokens, with their sampling
log-probabilities. Advantages are computed on the flat trajectories first (the group
statistics count each trajectory once, whatever its number of turns) and each turn row takes
the advantages of its tokens, so every sample carries its trajectory's advantage, as SkyRL,
rLLM and RLinf train non-append-only agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TurnRows:
    """The per-turn rows of a batch of trajectory rows.

    Attributes:
        prompt_ids: Each row's input (what the engine generated the turn from).
        response_ids: The turn's tokens.
        logprobs: Their sampling log-probabilities.
        source: The trajectory row each row comes from.
        spans: ``(start, end)`` of the turn's tokens in that trajectory's response.
    """

    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    source: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.response_ids)


def has_rewritten_contexts(summaries: Sequence[dict[str, Any]]) -> bool:
    """Whether any trajectory summary records a rewritten turn input (per-turn training)."""
    return any(summary.get("turn_contexts") for summary in summaries)


def split_turn_rows(
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[float]],
    summaries: Sequence[dict[str, Any]],
) -> TurnRows:
    """One row per non-empty model turn of each trajectory row, in order.

    Args:
        prompt_ids: Each trajectory's prompt.
        response_ids: Each trajectory's flat response (model and tool tokens).
        logprobs: Its sampling log-probabilities (0.0 on tool tokens).
        summaries: Each trajectory's summary with ``turn_spans`` (``[start, end, is_model]``)
            and ``turn_contexts`` (``[turn index, input ids]`` of the rewritten inputs).

    Raises:
        ValueError: The lists do not have one entry per trajectory, or a span lies outside
            its response.
    """
    counts = {len(prompt_ids), len(response_ids), len(logprobs), len(summaries)}
    if len(counts) != 1:
        raise ValueError(
            f"per-turn rows need one prompt, response, log-prob list and summary per "
            f"trajectory; got {len(prompt_ids)}, {len(response_ids)}, {len(logprobs)}, "
            f"{len(summaries)}"
        )
    rows = TurnRows()
    for row, summary in enumerate(summaries):
        response = list(response_ids[row])
        contexts = {int(turn): list(ids) for turn, ids in summary.get("turn_contexts") or []}
        for index, (start, end, is_model) in enumerate(summary["turn_spans"]):
            if not is_model or start == end:
                continue
            if not 0 <= start < end <= len(response):
                raise ValueError(
                    f"trajectory {row}: turn {index} spans tokens {start}:{end} of a "
                    f"{len(response)}-token response"
                )
            context = contexts.get(index)
            if context is None:
                context = [*prompt_ids[row], *response[:start]]
            rows.prompt_ids.append(context)
            rows.response_ids.append(response[start:end])
            rows.logprobs.append([float(x) for x in logprobs[row][start:end]])
            rows.source.append(row)
            rows.spans.append((start, end))
    return rows
