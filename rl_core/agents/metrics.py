"""Per-iteration statistics of agent trajectories, and the per-call cost of a reward.

Both read trajectory summaries: the dicts of :meth:`Trajectory.to_row
<rl_core.agents.trajectory.Trajectory.to_row>` (the token lists may be left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rl_core.agents.outcomes import Outcome

#: Sandbox limits that count as a timeout of the call.
TIME_LIMITS = frozenset({"wall", "cpu"})


def trajectory_metrics(
    summaries: Sequence[dict[str, Any]], prefix: str = "agent/"
) -> dict[str, float]:
    """Turns, tool calls and their outcomes, infrastructure failures, masked tokens.

    Args:
        summaries: One trajectory summary per row.
        prefix: Prefix of every metric name.

    Returns:
        ``turns_mean``, ``tool_calls_mean`` (per trajectory), ``tool_call_rate``
        (trajectories with a call), ``tool_error_rate`` and ``tool_timeout_rate`` (of the
        calls), ``tool_latency_mean`` (seconds per call), ``infra_failure_rate`` (of the
        trajectories) and ``masked_token_fraction`` (of the trajectories' tokens, turn spans
        weighted by length); empty for no summaries.
    """
    if not summaries:
        return {}
    calls = [c for s in summaries for c in s["tool_calls"]]
    masked = total = 0
    for s in summaries:
        for start, end, is_model in s["turn_spans"]:
            total += end - start
            masked += 0 if is_model else end - start
    n_calls = max(len(calls), 1)
    values = {
        "turns_mean": float(np.mean([s["num_turns"] for s in summaries])),
        "tool_calls_mean": float(np.mean([s["num_tool_calls"] for s in summaries])),
        "tool_call_rate": float(np.mean([s["num_tool_calls"] > 0 for s in summaries])),
        "tool_error_rate": sum(c["outcome"] == Outcome.MODEL_FAILURE.value for c in calls)
        / n_calls,
        "tool_timeout_rate": sum(c["detail"] in TIME_LIMITS for c in calls) / n_calls,
        "tool_latency_mean": float(np.mean([c["latency_s"] for c in calls])) if calls else 0.0,
        "infra_failure_rate": float(np.mean([bool(s["infra_failed"]) for s in summaries])),
        "masked_token_fraction": masked / total if total else 0.0,
    }
    return {prefix + k: float(v) for k, v in values.items()}


def trajectory_metrics_by_kind(
    summaries: Sequence[dict[str, Any]],
    kinds: Sequence[Any],
    prefix: str = "agent/",
) -> dict[str, float]:
    """:func:`trajectory_metrics` of all rows, and of each kind's rows (``<prefix><kind>/``).

    Args:
        summaries: One trajectory summary per row.
        kinds: One label per row (a prompt's ``kind`` field; None: no label). Rows without
            one count only in the overall metrics.
        prefix: Prefix of every metric name.
    """
    if not summaries:  # single responses: no trajectories to describe
        return {}
    metrics = trajectory_metrics(summaries, prefix)
    for kind in sorted({k for k in kinds if k is not None}, key=str):
        rows = [s for s, k in zip(summaries, kinds, strict=True) if k == kind]
        metrics |= trajectory_metrics(rows, f"{prefix}{kind}/")
    return metrics


def reward_by_tool_use(
    scores: Sequence[float],
    summaries: Sequence[dict[str, Any]],
    kinds: Sequence[Any],
    prefix: str = "agent/",
) -> dict[str, float]:
    """Mean reward of the trajectories that called a tool and of those that did not.

    What decides whether a tool call pays: compare the two with the call's cost.

    Args:
        scores: One reward per row (NaN: unscored, left out).
        summaries: One trajectory summary per row.
        kinds: One label per row (None: counted only in the overall figures).
        prefix: Prefix of every metric name.

    Returns:
        ``reward_with_tool`` and ``reward_without_tool``, overall and per kind
        (``<prefix><kind>/...``); a figure with no row is left out.

    Raises:
        ValueError: Not one summary and one kind per score.
    """
    values = np.asarray(scores, dtype=np.float64)
    if not len(summaries) == len(kinds) == len(values):
        raise ValueError(
            f"{len(values)} scores, {len(summaries)} trajectory summaries and {len(kinds)} "
            "kinds: one of each per row is needed"
        )
    called = np.array([s["num_tool_calls"] > 0 for s in summaries], dtype=bool)
    scored = np.isfinite(values)
    label = np.array([str(k) if k is not None else "" for k in kinds], dtype=object)
    metrics: dict[str, float] = {}
    for kind in ["", *sorted({k for k in label if k})]:
        rows = scored & ((label == kind) if kind else True)
        name = f"{prefix}{kind}/" if kind else prefix
        for flag, suffix in ((True, "reward_with_tool"), (False, "reward_without_tool")):
            pick = rows & (called == flag)
            if pick.any():
                metrics[name + suffix] = float(values[pick].mean())
    return metrics


def apply_call_cost(
    scores: np.ndarray, summaries: Sequence[dict[str, Any]], cost: float
) -> np.ndarray:
    """``scores`` minus ``cost`` per tool call of each row's trajectory (a new array).

    Raises:
        ValueError: Not one summary per score.
    """
    if len(summaries) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(summaries)} trajectories")
    calls = np.asarray([s["num_tool_calls"] for s in summaries], dtype=np.float32)
    return np.asarray(scores, dtype=np.float32) - np.float32(cost) * calls


def unscored_rows(scores: np.ndarray, summaries: Sequence[dict[str, Any]]) -> list[int]:
    """Rows left out of training: a tool's infrastructure failure, or a NaN score.

    A reward returns NaN for a response it could not score for reasons not the model's (a
    crashed sandbox after its retries): such a row is not scored 0, it is not scored.
    """
    bad = ~np.isfinite(np.asarray(scores, dtype=np.float64))
    return [
        i
        for i in range(len(scores))
        if bad[i] or (i < len(summaries) and bool(summaries[i].get("infra_failed")))
    ]
