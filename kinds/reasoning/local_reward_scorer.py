"""The reward model or judge of ``reward.model`` in this process (no Ray workers).

Scores a checkpoint's held-out responses in ``flows/evaluate.py`` the way the run's
reward-model workers scored them while it trained.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kinds.reasoning.model_reward_step import ModelRewardScores, scores_of
from kinds.reasoning.reward_model_source import check_model_source
from rl_core.rewards.model_scorers import build_scorer


class LocalModelRewardScorer:
    """``reward.model``'s scorer on this process's CPU.

    Args:
        section: The ``reward.model`` section, its ``uri`` a local model directory (as a
            checkpoint's config records it).

    Raises:
        ModelRewardSourceError: The directory is gone or holds another kind of model.
    """

    def __init__(self, section: Any) -> None:
        check_model_source(section)
        self.section = section
        self.scorer = build_scorer(section.uri, section, torch.device("cpu"))

    def score(
        self, prompts: list[str], responses: list[str], seed: int, timeout: float | None = None
    ) -> ModelRewardScores:
        """Scaled rewards of the rows (NaN for a model failure); ``timeout`` is not used."""
        start = time.perf_counter()
        torch.manual_seed(seed)
        out = self.scorer.score(prompts, responses)
        return scores_of([out.as_rows(time.perf_counter() - start)], self.section)
