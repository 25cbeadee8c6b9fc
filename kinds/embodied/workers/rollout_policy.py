"""The rollout copy of a control policy: sampling streams per env worker, synced weights.

Held by a :class:`~kinds.embodied.workers.rollout_worker.RolloutWorker` (disaggregated placement) or
by the trainer itself (:class:`~kinds.embodied.workers.hybrid_worker.HybridActorWorker`, the hybrid
engine of collocated placement). Either way it answers the same ``predict`` calls.
"""

from __future__ import annotations

from typing import Any

import torch

from kinds.embodied.config import EmbodiedConfig
from rl_core.seeding import sampling_seed
from rl_core.training.batch import to_numpy_tree


def kept_versions(cfg: EmbodiedConfig) -> int:
    """Weight versions a rollout copy keeps: those batches in flight may still use."""
    return cfg.algorithm.max_staleness + 1 if cfg.run.mode == "async" else 1


class RolloutPolicy:
    """A policy in eval mode with one sampling stream per calling env worker.

    In async mode (``keep_versions > 1``) the last ``keep_versions`` synced weight versions
    are kept, and a ``predict`` that names a version answers with exactly those weights: a
    batch collected while newer weights arrive stays on the version it started with.

    Args:
        policy: The rollout copy of the model (its weights are replaced by weight syncs).
        seed: Seed the per-caller sampling streams derive from.
        keep_versions: Synced versions kept for ``predict(version=…)`` (1: only the latest).
    """

    def __init__(self, policy: torch.nn.Module, seed: int, keep_versions: int = 1) -> None:
        self.policy = policy.eval()
        self.seed = seed
        self.keep_versions = keep_versions
        self.kept: dict[int, dict[str, torch.Tensor]] = {}
        # One sampling stream per calling env worker: requests of different env workers
        # interleave in arrival order, so a shared stream would not be reproducible.
        self.generators: dict[int, torch.Generator] = {}
        self.version = -1
        self._snapshot: dict[int, torch.Tensor] = {}

    def _generator(self, caller: int) -> torch.Generator:
        if caller not in self.generators:
            self.generators[caller] = torch.Generator().manual_seed(
                sampling_seed(self.seed, caller)
            )
        return self.generators[caller]

    @torch.no_grad()
    def predict(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        caller: int = 0,
        version: int | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Actions (env-ready numpy) and training extras for a batch of observations.

        Args:
            env_obs: Batched observations.
            mode: ``train`` (sample) or ``eval`` (deterministic).
            caller: Rank of the calling env worker (selects its sampling stream).
            version: Answer with these synced weights (kept ones; None: the current).

        Raises:
            KeyError: ``version`` is neither current nor kept.
        """
        if version is not None and version != self.version:
            if version not in self.kept:
                raise KeyError(
                    f"weights version {version} is not kept by this rollout copy (current "
                    f"{self.version}, kept {sorted(self.kept)})"
                )
            self.policy.load_state_dict(self.kept[version], strict=True)
            self.version = version
        actions, result = self.policy.predict_action_batch(
            env_obs, mode=mode, compute_values=True, generator=self._generator(caller)
        )
        return actions, to_numpy_tree(result)

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor], version: int) -> int:
        """Copy ``state`` into the rollout copy (kept too in async mode); returns the version."""
        self.policy.load_state_dict(state, strict=True)
        self.version = version
        if self.keep_versions > 1:
            self.kept[version] = {k: v.detach().clone() for k, v in state.items()}
            for old in sorted(self.kept)[: -self.keep_versions]:
                del self.kept[old]
        return version

    def get_rng_state(self) -> dict[int, torch.Tensor]:
        """Sampling RNG states per caller (checkpointed)."""
        return {caller: g.get_state() for caller, g in self.generators.items()}

    def set_rng_state(self, state: dict[int, torch.Tensor]) -> None:
        """Restore the sampling RNG states."""
        for caller, value in state.items():
            self._generator(int(caller)).set_state(value)

    def snapshot(self) -> None:
        """Keep the sampling streams' state (before a rollout)."""
        self._snapshot = self.get_rng_state()

    def restore(self) -> None:
        """Put back the sampling streams kept by :meth:`snapshot`."""
        self.generators = {}
        self.set_rng_state(self._snapshot)


class ServesRollout:
    """The rollout calls a worker answers from its :class:`RolloutPolicy` (``self.sampling``).

    Shared by separate rollout workers and the hybrid trainer: env workers, checkpoints and
    retries call these by name on whichever worker holds the rollout copy.
    """

    sampling: RolloutPolicy

    def predict(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        caller: int = 0,
        version: int | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Actions (env-ready numpy) and training extras for a batch of observations.

        Args:
            env_obs: Batched observations.
            mode: ``train`` (sample) or ``eval`` (deterministic).
            caller: Rank of the calling env worker (selects its sampling stream).
            version: The synced weights to answer with (async mode; None: the current).
        """
        return self.sampling.predict(env_obs, mode, caller, version)

    def get_rng_state(self) -> dict[int, torch.Tensor]:
        """Sampling RNG states per caller (checkpointed)."""
        return self.sampling.get_rng_state()

    def set_rng_state(self, state: dict[int, torch.Tensor]) -> None:
        """Restore the sampling RNG states."""
        self.sampling.set_rng_state(state)

    def get_caller_rng(self, caller: int) -> torch.Tensor:
        """The sampling stream state of env worker ``caller`` (async mode's per-batch undo)."""
        return self.sampling._generator(caller).get_state()

    def set_caller_rng(self, caller: int, state: torch.Tensor) -> None:
        """Put back the sampling stream state of env worker ``caller``."""
        self.sampling._generator(caller).set_state(state)

    def snapshot_rollout(self) -> None:
        """Keep the sampling streams' state (before a rollout)."""
        self.sampling.snapshot()

    def restore_rollout(self) -> None:
        """Put back the sampling streams kept by :meth:`snapshot_rollout`."""
        self.sampling.restore()
