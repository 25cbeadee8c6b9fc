"""Sampled responses of an iteration, and their form for reward functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rl_core.data import PromptSample


@dataclass
class ResponseBatch:
    """One iteration's responses, ``group_size`` rows per prompt group.

    ``group_index`` holds each row's group (:mod:`rl_core.algorithms.groups`); the
    group-relative advantage estimators and dynamic sampling group rows by it, not by their
    order. Evaluation batches, which no estimator reads, may leave it empty.

    ``loss_masks`` holds one 0/1 list per row, 0 on response tokens the model did not
    produce (tool output of a multi-turn trajectory: attended to, never trained on; see
    :mod:`rl_core.training.loss_mask`). Empty: every response token is the model's.

    ``trajectories`` holds one summary per row when an agent loop made the responses (turn
    spans, tool calls with their outcomes and latencies, finish reason; see
    :func:`kinds.reasoning.agent_rollout.trajectory_rows`). Empty: single responses.
    """

    samples: list[PromptSample] = field(default_factory=list)
    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    rollout_logprobs: list[list[float]] = field(default_factory=list)
    finished: list[bool] = field(default_factory=list)
    group_index: list[int] = field(default_factory=list)
    scores: np.ndarray | None = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    loss_masks: list[list[int]] = field(default_factory=list)
    trajectories: list[dict[str, Any]] = field(default_factory=list)

    def extend(self, other: ResponseBatch, rows: list[int]) -> None:
        """Append ``rows`` of ``other``, each of its groups under a group index new here.

        Rows of a batch without loss masks join one with them as fully trained on.

        Raises:
            ValueError: ``other`` has no group index for every row, or loss masks for only
                some rows.
        """
        if len(other.group_index) != len(other):
            raise ValueError(
                f"a batch of {len(other)} responses with {len(other.group_index)} group "
                "indices cannot be appended (every row needs its prompt group)"
            )
        if other.loss_masks and len(other.loss_masks) != len(other):
            raise ValueError(
                f"a batch of {len(other)} responses with {len(other.loss_masks)} loss masks "
                "cannot be appended (every row needs one, or none does)"
            )
        if other.loss_masks or self.loss_masks:
            if not self.loss_masks:
                self.loss_masks = [[1] * len(ids) for ids in self.response_ids]
            self.loss_masks.extend(
                list(other.loss_masks[r]) if other.loss_masks else [1] * len(other.response_ids[r])
                for r in rows
            )
        if bool(other.trajectories) != bool(self.trajectories) and len(self):
            raise ValueError("single responses and agent trajectories cannot share a batch")
        self.trajectories.extend(other.trajectories[r] for r in rows if other.trajectories)
        for name in ("samples", "prompt_ids", "response_ids", "rollout_logprobs", "finished"):
            getattr(self, name).extend(getattr(other, name)[r] for r in rows)
        start = max(self.group_index, default=-1) + 1
        renumbered: dict[int, int] = {}
        for r in rows:
            group = other.group_index[r]
            self.group_index.append(renumbered.setdefault(group, start + len(renumbered)))

    @classmethod
    def joined(cls, picks: list[tuple[ResponseBatch, list[int]]]) -> ResponseBatch:
        """One batch of the ``(batch, rows)`` picks, in order (see :meth:`extend`)."""
        joined = cls()
        for batch, rows in picks:
            joined.extend(batch, rows)
        return joined

    def __len__(self) -> int:
        return len(self.response_ids)


def reward_chunk(tokenizer: Any, batch: ResponseBatch, rows: list[int]) -> dict[str, list[Any]]:
    """``rows`` of ``batch`` as reward keywords: prompts, decoded completions, answers, fields.

    Trajectories of an agent loop add ``trajectories`` (their summaries: tool calls, turn
    spans); a completion is then the whole transcript, tool results included.
    """
    chunk = {
        "prompts": [batch.samples[r].prompt for r in rows],
        "completions": [
            tokenizer.decode(batch.response_ids[r], skip_special_tokens=True) for r in rows
        ],
        "answers": [batch.samples[r].answer for r in rows],
        "fields": [dict(batch.samples[r].fields) for r in rows],
    }
    if batch.trajectories:
        chunk["trajectories"] = [batch.trajectories[r] for r in rows]
    return chunk


def pad_right_float(rows: list[list[float]], width: int) -> torch.Tensor:
    """Right-pad float rows with zeros to ``width``."""
    out = torch.zeros((len(rows), width))
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row[:width])
    return out


def sampling_params(rollout_cfg: Any, eos_token_id: int, greedy: bool = False) -> dict[str, Any]:
    """``SamplingParams`` fields from a ``rollout`` config section (greedy for evaluation)."""
    return {
        "max_new_tokens": rollout_cfg.max_new_tokens,
        "temperature": rollout_cfg.temperature,
        "top_p": rollout_cfg.top_p,
        "top_k": rollout_cfg.top_k,
        "greedy": greedy,
        "stop_token_ids": (eos_token_id,),
    }
