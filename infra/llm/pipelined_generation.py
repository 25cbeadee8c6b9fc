"""Reasoning batches generated ahead of the trainer (``run.mode: async``).

At iteration ``k`` the rollout step draws the prompts of batch ``k + N`` (``N`` =
``algorithm.max_staleness``), launches their generation with the weights just synced
(version ``v_k``), and takes batch ``k``, launched ``N`` iterations earlier with
``v_{k-N}``. The rollout workers generate while the trainer scores, computes advantages and
updates. Which version generates a batch never depends on timing (rollout workers run their
calls in order, and keep the last ``N + 1`` versions for a batch launched again after a
failure), so an async run is reproducible from its seed; ``N = 0`` is sync mode.

The pipeline of launched batches is :class:`infra.rollout_pipeline.RolloutPipeline`, shared
with embodied runs: per rollout worker a ``(rows, generation)`` pair of ObjectRefs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from infra.llm.responses import ResponseBatch
from infra.rollout_pipeline import Chunk, RolloutPipeline, load_pipeline, pipeline_bytes
from rl_core.seeding import generation_rank_seed

if TYPE_CHECKING:
    from infra.reasoning_runtime import ReasoningRuntime


class PipelinedGeneration:
    """The launched batches of an async reasoning run, and the prompt cursor before each.

    Args:
        runtime: The run's :class:`~infra.reasoning_runtime.ReasoningRuntime`.
    """

    def __init__(self, runtime: ReasoningRuntime) -> None:
        self.runtime = runtime
        self.pipeline = RolloutPipeline(runtime.cfg.algorithm.max_staleness)
        self.cursor_before: dict[int, dict[str, Any]] = {}  # prompt cursor before each batch
        self._kept: tuple[list[Chunk], int] | None = None

    def _launch(self, index: int, version: int) -> list[tuple[Any, Any]]:
        """Draw batch ``index``'s prompts and start generating them with ``version``."""
        rt = self.runtime
        self.cursor_before[index] = rt.sampler.state_dict()
        rows, seed = rt.draw_rows(round_index=0)
        parts = np.array_split(np.asarray(rows), len(rt.rollout_group))
        sampling = rt.sampling_params()
        return [
            (
                ray.put({"rows": part.tolist()}),
                rt.rollout_group[rank].generate.remote(
                    [rt.train_prompts[i] for i in part],
                    sampling,
                    generation_rank_seed(seed, rank),
                    version,
                ),
            )
            for rank, part in enumerate(parts)
            if len(part)
        ]

    def take(self, iteration: int, version: int) -> tuple[ResponseBatch, dict[str, float]]:
        """Launch up to batch ``iteration + N`` and wait for batch ``iteration``.

        Args:
            iteration: The iteration taking its batch.
            version: The weight version the rollout workers were just synced to.

        Returns:
            The batch and its ``async/*`` metrics.
        """
        rt = self.runtime
        self.pipeline.fill(iteration, version, self._launch)
        for old in [i for i in self.cursor_before if i < iteration]:
            del self.cursor_before[old]
        chunk = self.pipeline.take(iteration)
        waited = time.perf_counter()
        ranks = list(range(len(chunk.pairs)))
        outs = rt.rollout_group.get(
            [p[1] for p in chunk.pairs], rt.timeouts.rollout, "rollout", ranks
        )
        rows = [r for part in ray.get([p[0] for p in chunk.pairs]) for r in part["rows"]]
        batch = ResponseBatch(
            samples=[rt.train_samples[i] for i in rows],
            prompt_ids=[rt.train_prompts[i] for i in rows],
            response_ids=[x for o in outs for x in o["response_ids"]],
            rollout_logprobs=[x for o in outs for x in o["logprobs"]],
            finished=[x for o in outs for x in o["finished"]],
        )
        staleness = float(version - chunk.version)
        metrics = {
            "async/staleness_mean": staleness,
            "async/staleness_max": staleness,
            "async/buffer_fill": len(self.pipeline.chunks) / max(self.pipeline.staleness, 1),
            "async/trainer_idle_seconds": time.perf_counter() - waited,
            "async/rollout_idle_seconds": self.pipeline.idle_seconds(outs),
        }
        return batch, metrics

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
            self.runtime.sampler.load_state_dict(self.cursor_before[index])

    # -- checkpoints -------------------------------------------------------------------
    def state_bytes(self, timeout: float) -> bytes:
        """The launched batches for a checkpoint (waits for them).

        Failed ones are forgotten first, with the prompt cursor put back, so the cursor
        saved next matches.
        """
        self.pipeline.drain(timeout)
        self._rewind(self.pipeline.forget_failed())
        return pipeline_bytes(self.pipeline)

    def load(self, store_uri: str, folder: str, step: int) -> None:
        """Put back the batches a checkpoint holds (none in a sync run's: start at ``step``)."""
        self.pipeline = load_pipeline(store_uri, folder, self.pipeline.staleness, step)
        self.cursor_before = {}
