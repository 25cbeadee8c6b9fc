"""Where a reasoning run's rollout engines and reference model live (chosen once, at start-up).

* :class:`HybridEngines` (the hybrid engine): each trainer rank also holds a rollout engine,
  asleep while the trainer updates, and, with a KL penalty, the reference model. Weights
  reach the engines in memory.
* :class:`SeparateEngines`: rollout workers and a reference worker in groups of their own.
  Weights travel from the trainer ranks to the rollout workers through the object store.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from infra.cluster.worker_group import WorkerGroup
from kinds.reasoning.worker_groups import ReasoningGroups
from rl_core.llm.sync_probe import check_probe

logger = logging.getLogger(__name__)


@dataclass
class SyncedWeights:
    """What a weight sync gave the rollout engines.

    Attributes:
        version: The weight version the rollout engines now hold.
        metrics: ``rollout/weight_sync_*`` metrics.
        info: The version and each rollout engine's version, for the step's record.
    """

    version: int
    metrics: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncProbe:
    """The weight-sync parity probe of a run (:mod:`rl_core.llm.sync_probe`).

    Attributes:
        tokens: ``{"prompt_ids", "response_ids"}`` of the probe text.
        atol: The largest allowed log-prob difference.
        adapters: The run syncs LoRA adapters (named in the error).
    """

    tokens: dict[str, list[int]]
    atol: float
    adapters: bool = False

    def check(self, trainer: list[float], engines: list[list[float] | None], version: int) -> dict:
        """The probe's metric; raises :class:`SyncProbeError` past the tolerance."""
        if all(lp is None for lp in engines):
            _warn_unscored()
            return {}
        worst = check_probe(trainer, engines, self.atol, version, self.adapters)
        return {"rollout/sync_probe_max_diff": worst}


@functools.cache  # once per process
def _warn_unscored() -> None:
    logger.warning(
        "the rollout engines cannot score the weight-sync probe (their logprobs_of "
        "returns None): rollout.sync_probe checks nothing"
    )


class Engines(Protocol):
    """The rollout engines and reference model of a reasoning run, and how weights reach them.

    Attributes:
        hybrid: Whether rollout engines and reference live in the trainer ranks.
        rollout: The workers that generate.
        groups: Every distinct worker group.
    """

    hybrid: bool
    rollout: WorkerGroup
    groups: list[WorkerGroup]

    def sync_weights(self, timeout: float, probe: SyncProbe | None = None) -> SyncedWeights:
        """Give the rollout engines the trainer's current weights (and check the probe).

        Raises:
            SyncProbeError: An engine's log-probs of the probe differ from the trainer's.
        """
        ...

    def reference_logprobs(
        self, trainer_outs: list[dict[str, Any]], arrays: dict[str, np.ndarray], timeout: float
    ) -> np.ndarray | None:
        """The reference model's log-probs of the batch ``arrays`` (None: no KL penalty)."""
        ...


def _from_trainer(trainer_outs: list[dict[str, Any]]) -> np.ndarray | None:
    """Reference log-probs the trainer ranks computed (those that hold the reference)."""
    if "ref_logprobs" not in trainer_outs[0]:
        return None
    return np.concatenate([o["ref_logprobs"] for o in trainer_outs])


class HybridEngines:
    """Rollout engine and reference inside each trainer rank; weights synced in memory.

    Args:
        groups: The run's worker groups (``rollout`` is ``actor``).
    """

    hybrid = True

    def __init__(self, groups: ReasoningGroups) -> None:
        self.actor = groups.actor
        self.rollout = groups.actor
        self.groups = groups.all

    def sync_weights(self, timeout: float, probe: SyncProbe | None = None) -> SyncedWeights:
        """Each trainer rank wakes its engine and loads its weights into it (no bytes sent)."""
        tokens = probe.tokens if probe is not None else None
        metas = self.actor.sync_rollout_weights(tokens, within=("weight_sync", timeout))
        version = int(metas[0]["version"])
        metrics = {"rollout/weight_sync_bytes": 0.0, "rollout/weight_sync_full": 1.0}
        if probe is not None:
            engines = [m["engine_probe_logprobs"] for m in metas]
            metrics.update(probe.check(metas[0]["probe_logprobs"], engines, version))
        return SyncedWeights(
            version,
            metrics,
            {"version": metas[0]["version"], "rollout_versions": [m["version"] for m in metas]},
        )

    def reference_logprobs(
        self, trainer_outs: list[dict[str, Any]], arrays: dict[str, np.ndarray], timeout: float
    ) -> np.ndarray | None:
        """The trainer ranks' reference log-probs (None without a KL penalty)."""
        return _from_trainer(trainer_outs)


class SeparateEngines:
    """Rollout workers and reference worker of their own; weights sent through the object store.

    Args:
        groups: The run's worker groups.
    """

    hybrid = False

    def __init__(self, groups: ReasoningGroups) -> None:
        self.actor = groups.actor
        self.rollout = groups.rollout
        self.ref = groups.ref
        self.groups = groups.all

    def sync_weights(self, timeout: float, probe: SyncProbe | None = None) -> SyncedWeights:
        """Rank 0 publishes a full or patch payload; every rollout worker loads it."""
        tokens = probe.tokens if probe is not None else None
        pairs = [h.sync_payload.options(num_returns=2).remote(tokens) for h in self.actor.handles]
        payload = pairs[0][1]
        meta = self.actor.get([p[0] for p in pairs], timeout, "weight_sync")[0]
        versions = self.rollout.load_weights(payload, within=("weight_sync", timeout))
        version = int(meta["version"])
        metrics = {
            "rollout/weight_sync_bytes": float(meta["nbytes"]),
            "rollout/weight_sync_full": float(meta["mode"] == "full"),
        }
        if probe is not None:
            engines = self.rollout.probe_logprobs(tokens, within=("weight_sync", timeout))
            metrics.update(probe.check(meta["probe_logprobs"], engines, version))
        return SyncedWeights(
            version, metrics, {"version": meta["version"], "rollout_versions": versions}
        )

    def reference_logprobs(
        self, trainer_outs: list[dict[str, Any]], arrays: dict[str, np.ndarray], timeout: float
    ) -> np.ndarray | None:
        """The reference worker's log-probs (the megatron trainer ranks hold their own)."""
        own = _from_trainer(trainer_outs)
        if own is not None or self.ref is None:
            return own
        return self.ref.compute_ref_logprobs(arrays, within=("advantage", timeout))


def engines_for(groups: ReasoningGroups) -> Engines:
    """The engine layout of the started ``groups``."""
    return HybridEngines(groups) if groups.hybrid else SeparateEngines(groups)
