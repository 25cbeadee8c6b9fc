"""Reward-model workers: a reward model or LLM judge scoring responses of a reasoning run.

A :class:`RewardScorerWorker` loads the model of ``reward.model`` once (a classifier's
head or a judge, :mod:`rl_core.rewards.model_scorers`) and scores the rows it is given in
batches. With ``placement: collocated`` on a GPU the model sits in host memory between
scoring calls, so the trainer sharing the GPU has it to itself while it updates (as the
hybrid engine's rollout engine sleeps). The workers hold no training state: a dead one is
respawned and the step retried, without rewinding the run.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from infra.cluster.dispatch import Split, worker_method
from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from kinds.reasoning.config import ReasoningConfig
from rl_core.rewards.model_scorers import build_scorer
from rl_core.seeding import scoring_worker_seed

logger = logging.getLogger(__name__)


class RewardScorerWorker(WorkerBase[ReasoningConfig]):
    """One reward-model worker (group ``reward``).

    Args:
        config: Resolved config (dict).
        rank: Index in the group.
        cpus: CPUs to pin to.
    """

    group = "reward"
    #: Holds no training state: a respawn needs no rewind to a checkpoint.
    stateless = True

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        super().__init__(config, rank, cpus)
        section = self.cfg.reward.model
        torch.manual_seed(scoring_worker_seed(self.cfg.run.seed, rank))
        #: Between calls the model waits in host memory (collocated placement on a GPU).
        self.offload = section.placement == "collocated" and self.device.type == "cuda"
        home = torch.device("cpu") if self.offload else self.device
        self.scorer = build_scorer(section.uri, section, home)
        self.scorer.device = home
        logger.info(
            "reward-model worker %d: %s %s on %s%s",
            rank,
            section.kind,
            section.uri,
            self.device,
            " (in host memory between calls)" if self.offload else "",
        )

    def _place(self, device: torch.device) -> None:
        self.scorer.module.to(device)
        self.scorer.device = device
        if device.type == "cpu" and torch.cuda.is_available():
            torch.cuda.empty_cache()

    @worker_method(split=Split.ROWS, row_args=2)
    @step_method
    def score(
        self, prompts: list[str], responses: list[str], seed: int
    ) -> dict[str, list[Any] | float]:
        """Raw scores of ``(prompt, response)`` rows (NaN where the model gave none).

        Args:
            prompts: The prompts.
            responses: One response per prompt.
            seed: Seed of this call (the run seed and the iteration; greedy judges and
                classifiers do not sample, it only fixes any sampling a scorer adds).

        Returns:
            ``scores``, ``failures`` (per row, why the model gave no score, or None) and
            ``seconds``.
        """
        watch = Stopwatch()
        torch.manual_seed(seed)
        if self.offload:
            self._place(self.device)
        try:
            out = self.scorer.score(prompts, responses)
        finally:
            if self.offload:
                self._place(torch.device("cpu"))
        return out.as_rows(watch.elapsed())
