"""Reasoning batches generated when the rollout step asks for them (sync mode).

With DAPO's dynamic sampling (``algorithm.dynamic_sampling``) more groups are generated until
the batch holds enough informative ones (groups whose rewards differ).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.checkpoint.layout import StatePart
from kinds.reasoning.responses import ResponseBatch
from kinds.reasoning.rollout_source import RolloutSource, generate_split
from rl_core.algorithms.dapo import fill_with_informative_groups


class SyncGeneration:
    """Each rollout step generates its own batch with the weights just synced.

    Args:
        source: The rollout workers and training prompts.
        prompts_per_batch: Prompts per batch (``data.prompts_per_batch``).
        algorithm: The ``algorithm`` section (group size, dynamic sampling).
        score: Rewards of a batch, scored in this process (for dynamic sampling).
    """

    def __init__(
        self,
        source: RolloutSource,
        prompts_per_batch: int,
        algorithm: Any,
        score: Callable[[ResponseBatch], list[float]],
    ) -> None:
        self.source = source
        self.prompts_per_batch = prompts_per_batch
        self.algorithm = algorithm
        self.score = score
        self._cursor: dict[str, Any] = {}

    def _sample_groups(self, round_index: int) -> ResponseBatch:
        src = self.source
        rows, groups, seed = src.prompts.draw_rows(round_index)
        ids = src.prompts.token_ids
        out, _ = generate_split(
            src.rollout,
            [ids[i] for i in rows],
            src.sampling(),
            seed,
            src.timeout,
            "rollout",
            src.agent,
        )
        return ResponseBatch(
            samples=[src.prompts.samples[i] for i in rows],
            prompt_ids=[ids[i] for i in rows],
            response_ids=out["response_ids"],
            rollout_logprobs=out["logprobs"],
            finished=out["finished"],
            group_index=groups,
            loss_masks=out.get("loss_masks", []),
            trajectories=out.get("trajectories", []),
        )

    def take(self, iteration: int, version: int) -> tuple[ResponseBatch, dict[str, float], int]:
        """Generate the batch (DAPO: keep only informative groups); no extra metrics."""
        algo, k = self.algorithm, self.algorithm.group_size
        picks, rounds = fill_with_informative_groups(
            self._sample_groups,
            self.score,
            lambda batch: batch.group_index,
            k,
            self.prompts_per_batch * k,
            algo.dynamic_sampling,
            algo.max_num_gen_batches,
        )
        return ResponseBatch.joined(picks), {}, rounds

    def snapshot(self) -> None:
        """Keep the prompt cursor."""
        self._cursor = self.source.prompts.sampler.state_dict()

    def restore(self, timeout: float) -> None:
        """Put back the prompt cursor."""
        self.source.prompts.sampler.load_state_dict(self._cursor)

    def checkpoint_part(self, timeout: float) -> StatePart | None:
        """Nothing beyond the prompt cursor."""
        return None
