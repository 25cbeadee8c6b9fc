"""Ray workers of the reasoning path: trainer ranks, rollout engines, reference model.

Batches travel as dicts of numpy arrays (see :mod:`rl_core.training.llm_update` for keys).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from infra.cluster.dispatch import DEFAULT, UPDATE_METRICS, Reduce, Split, worker_method
from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from infra.llm.workers.trainer_rank import TrainerRank
from infra.llm.workers.trainer_rank import tensors as _tensors
from infra.weight_sync import (
    WeightSender,
    payload_nbytes,
)
from rl_core.config import RLPipeConfig
from rl_core.llm.sync_probe import probe_batch
from rl_core.models import get_model
from rl_core.models.lora import trainable_parameters
from rl_core.training.llm_update import (
    FORWARD_KEYS,
    MinibatchTotals,
    llm_update,
    supports_packing,
)
from rl_core.training.micro_batches import MicroBatching, micro_batches
from rl_core.training.sft_update import sft_update

logger = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@torch.no_grad()
def forward_in_micro_batches(
    policy: Any,
    batch: dict[str, torch.Tensor],
    batching: MicroBatching | int,
    temperature: float,
    values: bool,
    world_size: int = 1,
) -> dict[str, np.ndarray]:
    """The policy's outputs of every row, ``[N, R]`` each, computed in micro-batches.

    Micro-batches hold any rows (a token budget sorts them by length); the outputs are put
    back in row order, padded to the batch's response width.

    Args:
        policy: The policy (or reference model) computing.
        batch: The rows (``prompt_*``/``response_*`` ids and masks, ``[N, …]`` tensors).
        batching: How the rows are cut (an int: rows per micro-batch).
        temperature: Sampling temperature of the responses.
        values: Also return the values (a critic's head).
        world_size: Ranks computing their parts in step (they agree on the passes).

    Returns:
        ``logprobs`` (and ``values``) ``[N, R]`` as numpy arrays.
    """
    n, width = batch["response_ids"].shape
    outs: dict[str, np.ndarray] = {}
    passes = micro_batches(batch, batching, supports_packing(policy), world_size)
    for pass_ in passes:
        part = pass_.inputs
        out = policy(  # __call__, not .forward: FSDP2's hooks unshard the root's parameters
            forward_type="default_forward",
            forward_inputs={k: part[k] for k in FORWARD_KEYS},
            compute_values=values,
            compute_entropy=False,
            temperature=temperature,
            packed=pass_.packed,
        )
        if pass_.filler:
            continue
        at = np.asarray(pass_.rows, dtype=np.int64)
        for key, value in out.items():
            target = outs.setdefault(key, np.zeros((n, width), dtype=np.float32))
            target[at, : value.shape[1]] = value.float().cpu().numpy()
    return outs


def reference_model(cfg: RLPipeConfig, device: torch.device) -> torch.nn.Module:
    """The frozen initial policy (``model`` section) in eval mode on ``device``."""
    return get_model(cfg.model, None).to(device).eval()


def trainer_batching(cfg: RLPipeConfig) -> MicroBatching:
    """How the trainer's forward passes cut their rows (the backend's micro-batch size)."""
    return MicroBatching.of(cfg.actor, cfg.actor.update_micro_batch_size)


def reference_logprobs(
    reference: torch.nn.Module,
    cfg: RLPipeConfig,
    batch: dict[str, np.ndarray],
    device: torch.device,
    world_size: int = 1,
) -> np.ndarray:
    """``[N, R]`` log-probs of the batch's responses under ``reference``.

    ``world_size``: ranks computing their parts in step (a sharded reference model).
    """
    out = forward_in_micro_batches(
        reference,
        _tensors(batch, device),
        trainer_batching(cfg),
        cfg.rollout.temperature,
        values=False,
        world_size=world_size,
    )
    return out["logprobs"]


class LLMActorWorker(TrainerRank):
    """One rank of the reasoning trainer (FSDP2 or megatron-core: ``actor.backend``).

    Backend, optimizer, checkpoints and snapshots are :class:`TrainerRank`'s; this class
    adds the policy's log-probs, its RL and supervised updates and the weight sync.

    Args:
        config: Resolved config (dict).
        rank: Trainer rank.
        cpus: CPUs to pin to.
        world_size: Number of trainer ranks.

    Attributes:
        reference: The frozen reference model this rank computes log-probs with, when it
            holds one (the hybrid engine; the megatron backend with a KL penalty).
    """

    def __init__(
        self, config: dict[str, Any], rank: int, cpus: tuple[int, ...], world_size: int
    ) -> None:
        super().__init__(config, rank, cpus, world_size)
        self.reference: torch.nn.Module | None = None
        rollout = self.cfg.rollout
        self.sender = WeightSender(
            rollout.weight_sync_mode,
            int(rollout.weight_sync_bucket_mb * 2**20),
            _DTYPES.get(rollout.weight_sync_dtype or ""),
            rollout.patch_full_sync_interval,
        )

    def setup(self, address: str) -> str:
        """Join the process group at ``address``, shard the model, build the optimizer.

        Returns:
            The trainer's layout in one line (for the log).
        """
        layout = super().setup(address)
        if self.backend.reference is not None:
            self.reference = self.backend.reference
        return layout

    def _weights_replaced(self) -> None:
        self.sender.reset()  # the rollout engines' copy no longer matches: a full sync next

    @worker_method(split=Split.REPLICA_ROWS, reduce={DEFAULT: Reduce.CONCAT})
    @step_method
    def compute_logprobs(self, shard: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Log-probs (and values with a critic) of this rank's rows under current weights.

        With a reference model in this rank, also ``ref_logprobs``.
        """
        self.policy.eval()
        out = forward_in_micro_batches(
            self.policy,
            _tensors(shard, self.device),
            trainer_batching(self.cfg),
            self.cfg.rollout.temperature,
            values=self.cfg.model.value_head,
            world_size=self.data_parallel_size,
        )
        if self.reference is not None:
            out["ref_logprobs"] = reference_logprobs(
                self.reference, self.cfg, shard, self.device, self.data_parallel_size
            )
        return out

    def _update_options(self) -> Any:
        """The ``actor`` section as the update reads it (this backend's micro-batch size)."""
        actor = self.cfg.actor
        return actor.model_copy(update={"micro_batch_size": actor.update_micro_batch_size})

    @worker_method(split=Split.REPLICA_ROWS, reduce=UPDATE_METRICS)
    @step_method
    def update(
        self, shard: dict[str, np.ndarray], totals: list[tuple[float, int]], iteration: int
    ) -> dict[str, float]:
        """One policy update on this rank's rows; bumps the weight version.

        Returns:
            This rank's share of the loss metrics (they add up over replicas), the learning
            rate (``train/lr``) and ``seconds``.
        """
        watch = Stopwatch()
        lr = self._set_lr(iteration)
        self.policy.train()
        replicas = self.data_parallel_size
        metrics = llm_update(
            self.policy,
            self.optimizer,
            _tensors(shard, self.device),
            [MinibatchTotals(t, s) for t, s in totals],
            self.cfg.algorithm,
            self._update_options(),
            replicas,
            self.cfg.rollout.temperature,
            self.cfg.algorithm.loss_agg_norm or self.cfg.rollout.max_new_tokens,
            guard=self.guard,
            iteration=iteration,
        )
        self.version += 1
        return {**metrics, "train/lr": lr, "seconds": watch.elapsed()}

    @worker_method(split=Split.REPLICA_ROWS, reduce=UPDATE_METRICS)
    def sft_update(
        self, shard: dict[str, np.ndarray], totals: tuple[float, int], iteration: int
    ) -> dict[str, float]:
        """One supervised step on this rank's rows (answer tokens as responses).

        Returns:
            The same metrics as :meth:`update`.
        """
        watch = Stopwatch()
        actor = self.cfg.actor
        lr = self._set_lr(iteration)
        self.policy.train()
        replicas = self.data_parallel_size
        metrics = sft_update(
            self.policy,
            self.optimizer,
            _tensors(shard, self.device),
            MinibatchTotals(*totals),
            trainer_batching(self.cfg),
            actor.max_grad_norm,
            replicas,
            guard=self.guard,
            iteration=iteration,
        )
        self.version += 1
        return {**metrics, "train/lr": lr, "seconds": watch.elapsed()}

    @step_method
    def sync_payload(
        self, probe: dict[str, list[int]] | None = None
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """``(meta, payload)`` of a weight sync (collective; only rank 0 returns them).

        Call with ``num_returns=2``: the small ``meta`` (version, mode, bytes and, given a
        ``probe``, the trainer's ``probe_logprobs``) goes to the driver while the payload
        goes from the object store to the rollout workers.
        """
        probe_lp = self.probe_logprobs(probe) if probe is not None else None
        state = self.backend.rollout_state(every_rank=False)
        if self.rank != 0:
            return None, None
        payload = self.sender.payload(state, self.version)
        meta = {"version": payload["version"], "mode": payload["mode"]}
        meta["nbytes"] = payload_nbytes(payload)
        if probe_lp is not None:
            meta["probe_logprobs"] = probe_lp
        return meta, payload

    def probe_logprobs(self, probe: dict[str, list[int]]) -> list[float]:
        """The trainer's log-probs of the sync probe's response tokens (collective)."""
        self.policy.eval()
        out = forward_in_micro_batches(
            self.policy, _tensors(probe_batch(probe), self.device), 1, 1.0, values=False
        )
        return [float(x) for x in out["logprobs"][0]]

    def reset_sync(self) -> None:
        """Make the next weight sync a full one."""
        self.sender.reset()

    def footprint(self) -> dict[str, int]:
        """This rank's share of what training holds.

        Trainable parameters (elements) and optimizer state (bytes), counted on this rank's
        shards: the sum over the ranks is the whole.
        """

        def local(t: torch.Tensor) -> torch.Tensor:
            return t.to_local() if hasattr(t, "to_local") else t

        params = sum(local(p).numel() for p in trainable_parameters(self.policy))
        state = sum(
            local(v).numel() * local(v).element_size()
            for per_param in self.optimizer.state.values()
            for v in per_param.values()
            if torch.is_tensor(v)
        )
        return {"trainable_parameters": int(params), "optimizer_state_bytes": int(state)}


class LLMRefWorker(WorkerBase):
    """The frozen initial policy: log-probs of responses under the reference model."""

    group = "reference"

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...]) -> None:
        super().__init__(config, rank, cpus)
        self.policy = reference_model(self.cfg, self.device)

    @worker_method(split=Split.RANK_ZERO, reduce=Reduce.FIRST)
    def compute_ref_logprobs(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """``[N, R]`` reference log-probs of the batch's responses."""
        return reference_logprobs(self.policy, self.cfg, batch, self.device)
