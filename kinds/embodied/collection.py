"""How an embodied run collects its batches: now, or ahead of the trainer.

The runtime picks one collection at start-up (:func:`collection_for`) and leaves to it the
rollout step's batch, the state a rollout retry puts back, and the collection state a
checkpoint holds:

- :class:`SyncCollection` (``run.mode: sync``): every env worker runs its rollout loop for
  this iteration's batch now; a retry puts back the env and sampling state from before it.
- :class:`AheadCollection` (``run.mode: async``): batch ``k + N`` is launched with the
  weights just synced and batch ``k`` taken (:mod:`infra.driver.rollout_pipeline`); the
  launched batches are part of a checkpoint.

Env workers split their envs into ``rollout.pipeline_stages`` slices themselves, whichever
collection launches them.
"""

from __future__ import annotations

import functools
import logging
import time
from abc import ABC, abstractmethod
from typing import Any

from infra.checkpoint.layout import StatePart
from infra.cluster.deadlines import wait_for
from infra.cluster.worker_group import WorkerGroup
from infra.driver.rollout_pipeline import (
    RolloutPipeline,
    pipeline_from_state,
    pipeline_part,
)
from rl_core.config import RLPipeConfig

logger = logging.getLogger(__name__)


class Collection(ABC):
    """Launches the env workers' rollout loops and hands their batches to the trainer.

    Args:
        cfg: The run config.
        env: The env worker group.
        serving: The group that answers the env workers' ``predict`` calls.
        actor: The trainer group (it receives the batches).
    """

    def __init__(
        self, cfg: RLPipeConfig, env: WorkerGroup, serving: WorkerGroup, actor: WorkerGroup
    ) -> None:
        self.cfg, self.env, self.serving, self.actor = cfg, env, serving, actor
        self.timeouts = cfg.timeouts

    @property
    def pipeline(self) -> RolloutPipeline | None:
        """The batches launched ahead (None: none are)."""
        return None

    def launch(self, index: int | None = None, version: int | None = None) -> list[tuple[Any, Any]]:
        """Start every env worker's rollout loop; ``(batch, stats)`` refs per env worker.

        Args:
            index: The batch's index when launched ahead (env workers keep their state from
                before it, for a retry).
            version: The weight version its actions are sampled with (None: the current).
        """
        return [
            h.interact.options(num_returns=2).remote(
                self.serving[i % len(self.serving)], self.cfg.rollout.num_steps, version, index
            )
            for i, h in enumerate(self.env.handles)
        ]

    def gather(self, pairs: list[tuple[Any, Any]]) -> list[dict[str, Any]]:
        """Wait for the launched rollout loops and hand their batches to the trainer."""
        # an env worker waits on its rollout worker: a deadline kills both
        owners = [
            (self.env.owners([i])[0], self.serving.owners([i % len(self.serving)])[0])
            for i in range(len(self.env))
        ]
        timeout = self.timeouts.rollout
        stats = wait_for([p[1] for p in pairs], owners, timeout, "rollout", self.env.liveness)
        self.actor.receive_batch(*[p[0] for p in pairs], within=("rollout", timeout))
        return stats

    @abstractmethod
    def collect(
        self, iteration: int, version: int
    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """The iteration's batch, handed to the trainer.

        Args:
            iteration: The iteration whose batch it is.
            version: The weight version the serving group was last given.

        Returns:
            Per env worker the batch's statistics, and the collection's own metrics.
        """

    @abstractmethod
    def snapshot(self) -> None:
        """Keep what a rollout changes, before it."""

    @abstractmethod
    def restore(self) -> None:
        """Put back what :meth:`snapshot` kept."""

    def checkpoint_part(self) -> StatePart | None:
        """The collection's part of a checkpoint (None: it has no state of its own)."""
        return None


class SyncCollection(Collection):
    """Collects each iteration's batch in its rollout step."""

    def collect(
        self, iteration: int, version: int
    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """Run every env worker's rollout loop now."""
        return self.gather(self.launch()), {}

    def snapshot(self) -> None:
        """Env state and sampling state of the serving group."""
        timeout = self.timeouts.rollout
        self.env.snapshot(within=("rollout", timeout))
        self.serving.snapshot_rollout(within=("rollout", timeout))

    def restore(self) -> None:
        """Put back the env state and sampling state kept by :meth:`snapshot`."""
        timeout = self.timeouts.rollout
        self.env.restore_snapshot(within=("rollout", timeout))
        self.serving.restore_rollout(within=("rollout", timeout))


class AheadCollection(Collection):
    """Collects batches up to ``algorithm.max_staleness`` weight versions ahead."""

    def __init__(
        self, cfg: RLPipeConfig, env: WorkerGroup, serving: WorkerGroup, actor: WorkerGroup
    ) -> None:
        super().__init__(cfg, env, serving, actor)
        self._pipeline = RolloutPipeline(cfg.algorithm.max_staleness)
        self._kept: Any = None
        logger.info(
            "async mode: batches collected up to %d weight version(s) ahead of the trainer",
            cfg.algorithm.max_staleness,
        )

    @property
    def pipeline(self) -> RolloutPipeline:
        """The launched, not yet taken batches."""
        return self._pipeline

    def collect(
        self, iteration: int, version: int
    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """Launch the batches up to ``iteration + N`` and take the one of ``iteration``."""
        pipeline = self._pipeline
        pipeline.fill(iteration, version, self.launch)
        chunk = pipeline.take(iteration)
        waited = time.perf_counter()
        stats = self.gather(chunk.pairs)
        staleness = float(version - chunk.version)
        return stats, {
            "async/staleness_mean": staleness,
            "async/staleness_max": staleness,
            "async/buffer_fill": len(pipeline.chunks) / max(pipeline.staleness, 1),
            "async/trainer_idle_seconds": time.perf_counter() - waited,
            "async/rollout_idle_seconds": pipeline.idle_seconds(stats),
        }

    def snapshot(self) -> None:
        """Only the set of launched batches: env workers keep their state before each one."""
        self._kept = self._pipeline.snapshot()

    def restore(self) -> None:
        """Wait for the launched batches; forget those from the first that failed on.

        Collected batches are kept; env workers put back their env and sampling state from
        before the first forgotten one, and the retried step launches them again with the
        same weight versions.
        """
        self._pipeline.drain(self.timeouts.rollout)
        self._rewind(self._pipeline.restore(self._kept), "rollout")

    def checkpoint_part(self) -> StatePart:
        """The launched batches (:data:`~infra.checkpoint.layout.PIPELINE_FILE`)."""
        return pipeline_part(self._checkpoint_state, self._load_checkpoint_state)

    def _checkpoint_state(self) -> dict[str, Any]:
        """The launched batches, settled (:meth:`RolloutPipeline.settle`)."""
        rewind = functools.partial(self._rewind, step="checkpoint")
        self._pipeline.settle(self.timeouts.checkpoint, self.launch, rewind)
        return self._pipeline.to_state()

    def _load_checkpoint_state(self, state: dict[str, Any] | None, step: int) -> None:
        """The launched batches a checkpoint holds (none: an empty pipeline at ``step``)."""
        staleness = self.cfg.algorithm.max_staleness
        self._pipeline = pipeline_from_state(state, staleness, step)

    def _rewind(self, index: int | None, step: str) -> None:
        """Env workers put back their env and sampling state from before batch ``index``."""
        if index is None:
            return
        self.env.get(
            [
                h.rewind.remote(self.serving[i % len(self.serving)], index)
                for i, h in enumerate(self.env.handles)
            ],
            getattr(self.timeouts, step),
            step,
        )


def collection_for(
    cfg: RLPipeConfig, env: WorkerGroup, serving: WorkerGroup, actor: WorkerGroup
) -> Collection:
    """Batches collected ahead in ``run.mode: async``, in the rollout step otherwise."""
    kind = AheadCollection if cfg.run.mode == "async" else SyncCollection
    return kind(cfg, env, serving, actor)
