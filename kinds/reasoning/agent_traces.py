"""A sample of an iteration's agent trajectories, as plain rows for MLflow traces.

The reward step picks ``tracking.agent_traces`` trajectories (evenly spread over the
batch, so the same ones on a rerun), decodes each turn, and hands the rows to the train loop,
which logs them once per iteration (:func:`infra.tracking.agent_traces.log_agent_traces`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kinds.reasoning.responses import ResponseBatch


def trace_rows(batch: ResponseBatch, tokenizer: Any, count: int) -> list[dict[str, Any]]:
    """Up to ``count`` of ``batch``'s trajectories with their turns decoded.

    Each row has ``prompt``, ``completion``, ``answer``, ``score`` (None: unscored),
    ``finish_reason``, ``row`` (its index in the batch), ``turns`` (``role``, ``text``,
    ``tokens``, ``finish_reason``, ``started``/``ended`` wall-clock seconds when known) and
    ``tool_calls`` (name, arguments, outcome, latency, detail, attempts, turn).
    """
    if not batch.trajectories or count <= 0:
        return []
    picks = sorted({int(i) for i in np.linspace(0, len(batch) - 1, min(count, len(batch)))})
    rows = []
    for r in picks:
        summary, ids = batch.trajectories[r], batch.response_ids[r]
        times = iter(summary.get("generation_times", []))
        turns = []
        model_turn = -1
        for start, end, is_model in summary["turn_spans"]:
            turn: dict[str, Any] = {
                "role": "model" if is_model else "tool",
                "text": tokenizer.decode(ids[start:end], skip_special_tokens=True),
                "tokens": end - start,
            }
            if is_model:
                model_turn += 1
                asked, answered = next(times, (None, None))
                turn.update(started=asked, ended=answered, index=model_turn)
            turns.append(turn)
        score = None if batch.scores is None else float(batch.scores[r])
        rows.append(
            {
                "row": r,
                "prompt": batch.samples[r].prompt,
                "answer": batch.samples[r].answer,
                "completion": tokenizer.decode(ids, skip_special_tokens=True),
                "score": score if score is not None and np.isfinite(score) else None,
                "finish_reason": summary["finish_reason"],
                "turns": turns,
                "tool_calls": list(summary["tool_calls"]),
            }
        )
    return rows
