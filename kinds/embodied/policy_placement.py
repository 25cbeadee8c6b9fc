"""Where the rollout policy of an embodied run lives: in the trainer, or in rollout workers.

The runtime picks one placement at start-up (:func:`policy_placement`) and leaves to it
which trainer worker class starts, which group answers the env workers' ``predict`` calls,
and how a weight sync reaches that group:

- :class:`HybridPlacement` (the hybrid engine): the trainer process holds the rollout copy
  of the policy and serves the predict calls itself; a weight sync is an in-memory copy.
- :class:`SeparatePlacement`: a group of rollout workers serves them; a weight sync sends
  the trainer's weights through the object store in buckets.

Both sample with the same streams and seeds, so they learn the same weights.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from infra.cluster.worker_group import WorkerGroup
from infra.driver.step_runtime import StepResult
from kinds.embodied.workers.rollout_worker import RolloutWorker
from rl_core.config import RLPipeConfig
from rl_core.config.hybrid import uses_hybrid_engine

logger = logging.getLogger(__name__)

#: ``make_group(name, worker class)``: a worker group of the run, sized by the placement plan.
MakeGroup = Callable[[str, type], WorkerGroup]


class PolicyPlacement(ABC):
    """Which process serves rollout inference, and how its weights are refreshed.

    Attributes:
        hybrid: Whether the trainer serves rollout inference itself.
        serving: The group that answers the env workers' ``predict`` calls (set by
            :meth:`start`).
        own_groups: The worker groups this placement adds to the run.
    """

    hybrid: bool
    serving: WorkerGroup

    def __init__(self) -> None:
        self.own_groups: list[WorkerGroup] = []

    @abstractmethod
    def sizes(self, cfg: RLPipeConfig) -> dict[str, int]:
        """Workers per group this placement adds to the placement plan."""

    @abstractmethod
    def trainer_class(self, trainer: type, hybrid_trainer: type) -> type:
        """The trainer worker class, of the runtime's plain and hybrid ones."""

    @abstractmethod
    def start(self, actor: WorkerGroup, make_group: MakeGroup) -> WorkerGroup:
        """Start what serves rollout inference; returns the group that serves it."""

    @abstractmethod
    def weight_sync(self, actor: WorkerGroup, timeout: float, bucket_mb: float) -> StepResult:
        """Bring the trainer's current weights to the serving group.

        Returns:
            The step's result; ``info`` holds the ``version`` synced and the
            ``rollout_versions`` the serving workers report.
        """


class HybridPlacement(PolicyPlacement):
    """The hybrid engine: the trainer process serves rollout inference."""

    hybrid = True

    def sizes(self, cfg: RLPipeConfig) -> dict[str, int]:
        """No group of its own."""
        return {}

    def trainer_class(self, trainer: type, hybrid_trainer: type) -> type:
        """The hybrid trainer class (it also answers predict calls)."""
        return hybrid_trainer

    def start(self, actor: WorkerGroup, make_group: MakeGroup) -> WorkerGroup:
        """The trainer group serves the predict calls."""
        logger.info("hybrid engine: rollout policy inside the trainer process")
        self.serving = actor
        return actor

    def weight_sync(self, actor: WorkerGroup, timeout: float, bucket_mb: float) -> StepResult:
        """Copy the trainer's weights into its rollout copy, in memory."""
        start = time.perf_counter()
        (out,) = actor.sync_rollout_weights(within=("weight_sync", timeout))
        return StepResult(
            time.perf_counter() - start,
            {"rollout/weight_sync_bytes": 0.0, "rollout/weight_sync_buckets": 0.0},
            info={"version": out["version"], "rollout_versions": [out["version"]]},
        )


class SeparatePlacement(PolicyPlacement):
    """A group of rollout workers serves rollout inference."""

    hybrid = False

    def sizes(self, cfg: RLPipeConfig) -> dict[str, int]:
        """``rollout.num_workers`` rollout workers."""
        return {"rollout": cfg.rollout.num_workers}

    def trainer_class(self, trainer: type, hybrid_trainer: type) -> type:
        """The plain trainer class."""
        return trainer

    def start(self, actor: WorkerGroup, make_group: MakeGroup) -> WorkerGroup:
        """Start the rollout worker group."""
        group = make_group("rollout", RolloutWorker)
        self.serving = group
        self.own_groups = [group]
        return group

    def weight_sync(self, actor: WorkerGroup, timeout: float, bucket_mb: float) -> StepResult:
        """Send the trainer's weights in buckets through the object store."""
        start = time.perf_counter()
        (out,) = actor.get(
            [actor[0].get_weight_buckets.remote(bucket_mb)], timeout, "weight_sync", ranks=[0]
        )
        versions = self.serving.load_weights(
            out["refs"], out["version"], within=("weight_sync", timeout)
        )
        return StepResult(
            time.perf_counter() - start,
            {
                "rollout/weight_sync_bytes": float(out["bytes"]),
                "rollout/weight_sync_buckets": float(len(out["refs"])),
            },
            info={"version": out["version"], "rollout_versions": versions},
        )


def policy_placement(cfg: RLPipeConfig) -> PolicyPlacement:
    """The placement of ``cfg``: the hybrid engine when ``cluster.hybrid_engine`` allows."""
    return HybridPlacement() if uses_hybrid_engine(cfg) else SeparatePlacement()
