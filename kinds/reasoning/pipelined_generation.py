"""Reasoning batches generated ahead of the trainer (``run.mode: async``).

At iteration ``k`` the rollout step draws the prompts of batch ``k + N`` (``N`` =
``algorithm.max_staleness``), launches their generation with the weights just synced
(version ``v_k``), and takes batch ``k``, launched ``N`` iterations earlier with
``v_{k-N}``. The rollout workers generate while the trainer scores, computes advantages and
updates. Which version generates a batch never depends on timing (rollout workers run their
calls in order, and keep the last ``N + 1`` versions for a batch launched again after a
failure), so an async run is reproducible from its seed; ``N = 0`` is sync mode.

Partial rollouts (``rollout.partial_rollout_tokens: T``): a batch in flight advances ``T``
tokens per weight version. It is launched with ``v_k`` for its first ``T`` tokens; at every
later iteration, once the new weights are synced, its unfinished responses continue for
``T`` more tokens under them, and at the iteration that takes it they finish under the
trainer's current weights. Every token carries the version that generated it, and its
log-probability under that version is the behaviour log-probability the loss uses.

The pipeline of launched batches is :class:`infra.driver.rollout_pipeline.RolloutPipeline`, shared
with embodied runs: per rollout worker a ``(rows, generation)`` pair of ObjectRefs, where
``rows`` holds the prompt and the group index of each row (checkpointed with the batch).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from infra.checkpoint.layout import StatePart
from infra.cluster.dispatch import PerRank, row_parts
from infra.driver.rollout_pipeline import (
    Chunk,
    RolloutPipeline,
    pipeline_from_state,
    pipeline_part,
)
from kinds.reasoning.responses import ResponseBatch
from kinds.reasoning.rollout_source import RolloutSource
from rl_core.agents.trajectory import NO_VERSION
from rl_core.algorithms import consecutive_groups
from rl_core.seeding import generation_rank_seed, generation_segment_seed


def batch_groups(metas: list[dict[str, Any]], group_size: int) -> list[int]:
    """The group index of a launched batch's rows, from its per-worker ``rows`` metadata.

    A batch checkpointed without one (before rows carried their group) was launched in
    group order: ``group_size`` consecutive rows per prompt.
    """
    if all("groups" in meta for meta in metas):
        return [g for meta in metas for g in meta["groups"]]
    rows = sum(len(meta["rows"]) for meta in metas)
    return consecutive_groups(rows // group_size, group_size).tolist()


class PipelinedGeneration:
    """The launched batches of an async reasoning run, and the prompt cursor before each.

    Args:
        source: The rollout workers and training prompts.
        max_staleness: Batches launched ahead (``algorithm.max_staleness``).
        segment_tokens: New tokens per weight version of a batch in flight
            (``rollout.partial_rollout_tokens``; 0: a batch is generated whole at launch).
    """

    def __init__(self, source: RolloutSource, max_staleness: int, segment_tokens: int) -> None:
        self.source = source
        self.pipeline = RolloutPipeline(max_staleness)
        self.cursor_before: dict[int, dict[str, Any]] = {}  # prompt cursor before each batch
        self._kept: tuple[list[Chunk], int] | None = None
        self.segment_tokens = segment_tokens
        self.published: dict[int, int] = {}  # iteration -> the weight version synced in it
        self.launched_at: dict[int, int] = {}  # batch -> iteration of its first segment
        self.through: dict[int, int] = {}  # batch -> last iteration it was generated in
        self.restored: dict[int, list[tuple[Any, Any]]] = {}  # batches from the checkpoint
        self.restored_through = -1
        self.iteration = 0

    def _budget(self, index: int, iteration: int) -> int | None:
        """New tokens per response of batch ``index``'s segment at ``iteration``.

        None: all that are left (the segment of the iteration that takes the batch).
        """
        return None if iteration >= index else self.segment_tokens

    def _launch(self, index: int, version: int) -> list[tuple[Any, Any]]:
        """Draw batch ``index``'s prompts and start generating them with ``version``.

        A batch launched again after a failure also generates, with their versions, the
        segments it had generated in the iterations since it was first launched.
        """
        if index in self.restored:  # its prompts were drawn before the checkpoint
            return self._catch_up(self.restored[index], index, self.restored_through)
        src = self.source
        self.cursor_before[index] = src.prompts.sampler.state_dict()
        rows, groups, seed = src.prompts.draw_rows(round_index=0)
        parts = row_parts(len(rows), len(src.rollout))  # as the declared split cuts them
        start = self.launched_at.setdefault(index, self.iteration)
        sampling = src.sampling()
        budget = self._budget(index, start) if self.segment_tokens else None
        if budget is not None:
            sampling["max_new_tokens"] = min(budget, sampling["max_new_tokens"])
        seeds = [generation_rank_seed(seed, rank) for rank in range(len(src.rollout))]
        metas = [
            {
                "rows": [rows[i] for i in part],
                "groups": [groups[i] for i in part],
                "seed": seeds[rank],
                "start": start,
            }
            for rank, part in enumerate(parts)
            if len(part)
        ]
        prompts = [src.prompts.token_ids[i] for i in rows]
        if src.agent is None:
            out = src.rollout.generate.remote(prompts, sampling, PerRank(seeds), version)
        else:  # multi-turn trajectories, all turns with the launch's version
            out = src.rollout.run_agents.remote(
                prompts, sampling, PerRank(seeds), src.agent, version
            )
        pairs = [(ray.put(meta), ref) for meta, ref in zip(metas, out.refs, strict=True)]
        return self._catch_up(pairs, index, start)

    def _catch_up(self, pairs: list[tuple[Any, Any]], index: int, done: int) -> list:
        """Batch ``index``, generated through iteration ``done``, continued through this one.

        Without partial rollouts a batch is whole once launched.
        """
        if not self.segment_tokens:
            self.through[index] = index
            return pairs
        self.through[index] = done
        for iteration in range(done + 1, self.iteration + 1):
            pairs = self._segment(pairs, index, iteration)
        return pairs

    def _segment(self, pairs: list[tuple[Any, Any]], index: int, iteration: int) -> list:
        """Continue batch ``index`` with the weights synced at ``iteration``; the new pairs."""
        src = self.source
        version, budget = self.published[iteration], self._budget(index, iteration)
        sampling = src.sampling()
        continued = []
        for rank, (meta_ref, out) in enumerate(pairs):
            meta = ray.get(meta_ref)
            seed = generation_segment_seed(meta["seed"], iteration - meta["start"])
            prompts = [src.prompts.token_ids[i] for i in meta["rows"]]
            ref = src.rollout[rank].continue_generation.remote(
                prompts, out, sampling, seed, version, budget
            )
            continued.append((meta_ref, ref))
        self.through[index] = iteration
        return continued

    def _advance(self, iteration: int) -> None:
        """Continue every partial batch in flight with the weights just synced.

        The chunks are changed in place: a snapshot taken before (for a retry) sees the
        segments launched since, which :attr:`through` records as done.
        """
        for chunk in self.pipeline.chunks:
            if self.through.get(chunk.index, chunk.index) < iteration:
                chunk.pairs = self._segment(chunk.pairs, chunk.index, iteration)

    def take(self, iteration: int, version: int) -> tuple[ResponseBatch, dict[str, float], int]:
        """Launch up to batch ``iteration + N`` and wait for batch ``iteration``.

        Args:
            iteration: The iteration taking its batch.
            version: The weight version the rollout workers were just synced to.

        Returns:
            The batch, its ``async/*`` metrics and its generation rounds (one).
        """
        src = self.source
        self.iteration, self.published[iteration] = iteration, version
        self._advance(iteration)
        self.pipeline.fill(iteration, version, self._launch)
        for book in (self.cursor_before, self.launched_at, self.through, self.restored):
            for old in [i for i in book if i < iteration]:
                del book[old]
        for old in [i for i in self.published if i < iteration - self.pipeline.staleness]:
            del self.published[old]
        chunk = self.pipeline.take(iteration)
        waited = time.perf_counter()
        ranks = list(range(len(chunk.pairs)))
        outs = src.rollout.get([p[1] for p in chunk.pairs], src.timeout, "rollout", ranks)
        metas = ray.get([p[0] for p in chunk.pairs])
        rows = [r for part in metas for r in part["rows"]]
        batch = ResponseBatch(
            samples=[src.prompts.samples[i] for i in rows],
            prompt_ids=[src.prompts.token_ids[i] for i in rows],
            response_ids=[x for o in outs for x in o["response_ids"]],
            rollout_logprobs=[x for o in outs for x in o["logprobs"]],
            finished=[x for o in outs for x in o["finished"]],
            group_index=batch_groups(metas, src.prompts.group_size),
            loss_masks=[x for o in outs for x in o.get("loss_masks", [])],
            trajectories=[x for o in outs for x in o.get("trajectories", [])],
        )
        # tokens no model sampled (tool output: NO_VERSION) have no staleness
        lags = [
            version - v for o in outs for row in o["versions"] for v in row if v != NO_VERSION
        ] or [0]
        metrics = {
            "async/staleness_mean": float(np.mean(lags)),
            "async/staleness_max": float(max(lags)),
            "async/buffer_fill": len(self.pipeline.chunks) / max(self.pipeline.staleness, 1),
            "async/trainer_idle_seconds": time.perf_counter() - waited,
            "async/rollout_idle_seconds": self.pipeline.idle_seconds(outs),
        }
        return batch, metrics, 1

    # -- retries -----------------------------------------------------------------------
    def snapshot(self) -> None:
        """Keep the launched batches (before a rollout step)."""
        self._kept = self.pipeline.snapshot()

    def restore(self, timeout: float) -> None:
        """Undo a failed rollout step.

        Batches that were generated are kept; from the first that failed on, they are
        forgotten and the prompt cursor goes back to before it (the retried step launches
        them again, with the same prompts, seeds and versions).
        """
        self.pipeline.drain(timeout)
        self._rewind(self.pipeline.restore(self._kept))

    def _rewind(self, index: int | None) -> None:
        if index is not None:
            self.source.prompts.sampler.load_state_dict(self.cursor_before[index])

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint_part(self, timeout: float) -> StatePart:
        """The launched batches (:data:`~infra.checkpoint.layout.PIPELINE_FILE`).

        Gathered before the prompt cursor: settling them (:meth:`RolloutPipeline.settle`)
        forgets failed ones, puts the cursor back and launches them again with their
        weight versions.
        """

        def settled() -> dict[str, Any]:
            self.pipeline.settle(timeout, self._launch, self._rewind)
            return self.pipeline.to_state()

        return pipeline_part(settled, self._load_checkpoint_state)

    def _load_checkpoint_state(self, state: dict[str, Any] | None, step: int) -> None:
        """Put back the batches a checkpoint holds (none in a sync run's: start at ``step``)."""
        self.pipeline = pipeline_from_state(state, self.pipeline.staleness, step)
        self.published, self.launched_at = {}, {}
        # The checkpoint's batches were generated through the iteration before ``step``. One
        # forgotten after a failed segment starts again from its checkpointed part, with the
        # prompt cursor as loaded (it was drawn before the checkpoint).
        self.restored_through = step - 1
        self.restored = {c.index: list(c.pairs) for c in self.pipeline.chunks}
        self.through = {
            c.index: step - 1 if self.segment_tokens else c.index for c in self.pipeline.chunks
        }
        cursor = self.source.prompts.sampler.state_dict()
        self.cursor_before = {c.index: cursor for c in self.pipeline.chunks}
