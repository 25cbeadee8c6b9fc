"""The hybrid engine of a control-policy run: trainer and rollout policy in one process.

With collocated placement (rollout and trainer on the same CPUs/GPUs) the rollout copy of
the policy lives in the trainer's process: a weight sync is an in-memory copy of the
trainer's tensors (no serialization, no object store), and env workers send their
``predict`` calls to the trainer. Sampling streams and seeds are those a separate
:class:`~kinds.embodied.workers.rollout_worker.RolloutWorker` of the same rank would use, so both
placements learn the same weights from the same seed.
"""

from __future__ import annotations

import copy
from typing import Any

from infra.cluster.worker_base import Stopwatch, step_method
from kinds.embodied.workers.actor_worker import ActorWorker
from kinds.embodied.workers.off_policy_trainer import OffPolicyActorWorker
from kinds.embodied.workers.offline_trainer import OfflineActorWorker
from kinds.embodied.workers.rollout_policy import RolloutPolicy, ServesRollout
from rl_core.seeding import worker_seed


class HybridEngine(ServesRollout):
    """Mixin for a trainer class: it also serves rollout inference (collocated placement).

    Put it before the trainer class: ``class X(HybridEngine, MyTrainer)``; the trainer must
    set ``self.policy`` and ``self.version``.
    """

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], spaces: Any
    ) -> None:
        super().__init__(config, rank, cpus, spaces)  # type: ignore[call-arg]
        # a deep copy draws no random numbers: the trainer's RNG stays where it would be;
        # it is on the trainer's device, so a weight sync is a device-to-device copy
        self.sampling = RolloutPolicy(
            copy.deepcopy(self.policy), worker_seed(self.cfg.run.seed, "rollout", rank)
        )

    @step_method
    def sync_rollout_weights(self) -> dict[str, Any]:
        """Copy the trainer's weights into the rollout copy (in memory).

        Returns:
            ``{"version", "bytes", "seconds"}``; ``bytes`` is 0: nothing leaves the process.
        """
        watch = Stopwatch()
        version = self.sampling.load_state_dict(self.policy.state_dict(), self.version)
        return {"version": version, "bytes": 0, "seconds": watch.elapsed()}


class HybridActorWorker(HybridEngine, ActorWorker):
    """An :class:`ActorWorker` (PPO) that also serves rollout inference."""


class HybridOffPolicyActorWorker(HybridEngine, OffPolicyActorWorker):
    """An :class:`OffPolicyActorWorker` (SAC, CrossQ, RLPD) that also serves rollout inference."""


class HybridOfflineActorWorker(HybridEngine, OfflineActorWorker):
    """An :class:`OfflineActorWorker` (IQL) that also serves rollout inference.

    An offline run collects nothing; the placement is that of every embodied run.
    """
