"""One rank of a language-model trainer: backend, optimizer, checkpoints, snapshots.

What every trainer of a Hugging Face model shares, whatever it trains on: the parallel
backend that holds the model (FSDP2 or megatron-core, ``actor.backend``), the optimizer and
learning-rate schedule, the guard against non-finite updates, sharded checkpoints (DCP plus
the full weights on rank 0) and the in-memory snapshot a retried step is undone with. The
reasoning trainer (:class:`~infra.llm.workers.llm_workers.LLMActorWorker`) and the
reward-model trainer (:class:`~kinds.reward_model.worker.RewardModelWorker`) add their
steps.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from infra.checkpoint.layout import (
    ACTOR_MODEL,
    ACTOR_TRAINER_STATE,
    SAFETENSORS,
    TORCH,
    actor_file,
    read_file,
    sharded_dir,
    write_file,
)
from infra.checkpoint.store import CheckpointError, open_store
from infra.cluster.dispatch import Reduce, Split, worker_method
from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from infra.llm import distributed
from infra.llm.trainer_backends import make_backend
from rl_core.models.lora import trainable_parameters
from rl_core.seeding import worker_seed
from rl_core.training.nonfinite import (
    SkippedUpdateGuard,
    any_rank,
    nonfinite_tensors,
    nonfinite_weights_message,
)
from rl_core.training.optim import build_optimizer, learning_rate, set_learning_rate


def tensors(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A batch of numpy arrays as (writable) tensors on ``device``."""
    return {k: torch.from_numpy(np.array(v, copy=True)).to(device) for k, v in batch.items()}


class TrainerRank(WorkerBase):
    """One rank of a trainer whose model lives in a trainer backend.

    Args:
        config: Resolved config (dict).
        rank: Trainer rank.
        cpus: CPUs to pin to.
        world_size: Number of trainer ranks.
    """

    group = "actor"
    opens_checkpoint_store = True

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], world_size: int
    ) -> None:
        super().__init__(config, rank, cpus)
        self.world_size = world_size
        torch.manual_seed(worker_seed(self.cfg.run.seed, "actor", 0))  # same on every rank
        self.backend = make_backend(self.cfg, rank, world_size, self.device)
        self.optimizer: torch.optim.Optimizer | None = None
        self.guard = SkippedUpdateGuard(self.cfg.actor.max_skipped_updates_in_a_row)
        self.version = 0

    @property
    def policy(self) -> torch.nn.Module:
        """The trainable model (this rank's shard of it)."""
        return self.backend.policy

    @property
    def data_parallel_size(self) -> int:
        """Replicas the batch is split across (ranks / tensor-parallel size)."""
        return self.backend.data_parallel_size

    @worker_method(split=Split.RANK_ZERO, reduce=Reduce.FIRST)
    def rendezvous_address(self) -> str:
        """Where the trainer's process group meets (asked of rank 0): its node and a port."""
        return distributed.rendezvous_address()

    def setup(self, address: str) -> str:
        """Join the process group at ``address``, shard the model, build the optimizer.

        Returns:
            The trainer's layout in one line (for the log).
        """
        layout = self.backend.setup(address)
        self.optimizer = build_optimizer(trainable_parameters(self.policy), self.cfg.actor)
        return layout

    def _set_lr(self, iteration: int) -> float:
        lr = learning_rate(self.cfg.actor, iteration, self.cfg.run.max_iterations)
        set_learning_rate(self.optimizer, lr)
        return lr

    def _weights_replaced(self) -> None:
        """Called after the weights were put back (snapshot restored, checkpoint loaded)."""
        return None

    def snapshot(self) -> None:
        """Keep this rank's model and optimizer state, the version and the skip streak."""
        self._snapshot = (
            copy.deepcopy(self.policy.state_dict()),
            copy.deepcopy(self.optimizer.state_dict()),
            self.version,
            self.guard.in_a_row,
        )

    def restore_snapshot(self) -> None:
        """Put back what :meth:`snapshot` kept (an update that failed midway is undone)."""
        model, optimizer, version, skipped_in_a_row = self._snapshot
        self.policy.load_state_dict(model)
        self.optimizer.load_state_dict(copy.deepcopy(optimizer))
        self.version = version
        self.guard.in_a_row = skipped_in_a_row
        self._weights_replaced()

    def full_state(self) -> dict[str, np.ndarray] | None:
        """The whole model state dict as numpy (collective; rank 0 returns it)."""
        state = self.backend.policy_state()
        return {k: v.numpy() for k, v in state.items()} if self.rank == 0 else None

    @step_method
    def save_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Sharded model+optimizer (DCP) plus, on rank 0, the full weights (collective).

        Raises:
            CheckpointError: A weight shard of any rank holds inf or NaN (every rank raises,
                nothing is written).
        """
        watch = Stopwatch()
        bad = nonfinite_tensors(self.policy.state_dict().items())
        if any_rank(bool(bad), self.device, self.world_size):  # every rank: shards differ
            raise CheckpointError(nonfinite_weights_message(bad, self.version))
        store = open_store(store_uri)
        layout = self.backend.save_sharded(self.optimizer, sharded_dir(store, folder))
        state = self.backend.policy_state()
        if self.rank == 0:
            write_file(store, folder, actor_file(0, ACTOR_MODEL), SAFETENSORS, state)
            state = {
                "version": self.version,
                "skipped_updates_in_a_row": self.guard.in_a_row,
                "layout": layout,
            }
            write_file(store, folder, actor_file(0, ACTOR_TRAINER_STATE), TORCH, state)
        return {"seconds": watch.elapsed(), "version": self.version}

    def load_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Restore what :meth:`save_checkpoint` wrote (collective)."""
        store = open_store(store_uri)
        local = sharded_dir(store, folder)
        state = read_file(store, folder, actor_file(0, ACTOR_TRAINER_STATE), TORCH)
        layout = state.get("layout", {"backend": "fsdp"})
        self.backend.load_sharded(self.optimizer, local, layout, self.cfg.run.trust_checkpoint)
        self.version = int(state["version"])
        self.guard.in_a_row = int(state.get("skipped_updates_in_a_row", 0))
        self._weights_replaced()
        return {"version": self.version}


def setup_trainer(group: Any, timeout: float) -> str:
    """Have every rank of a started trainer group join rank 0's process group (collective).

    Args:
        group: The trainer's :class:`~infra.cluster.worker_group.WorkerGroup` of
            :class:`TrainerRank` workers.
        timeout: Seconds allowed (``timeouts.worker_start``).

    Returns:
        The trainer's layout in one line (for the log).
    """
    address = group.rendezvous_address(within=("worker_start", timeout))
    return group.setup(address, within=("worker_start", timeout))[0]
