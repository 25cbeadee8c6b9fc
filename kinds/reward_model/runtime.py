"""RewardModelRuntime: the trainer ranks of a reward-model run and the steps tasks call.

The step contract of :class:`infra.driver.step_runtime.StepRuntime` for a reward model
trained on preference pairs: the rollout step takes the next pairs from the data cursor and
tokenizes them (``actor.steps_per_iteration`` batches of ``data.pairs_per_batch``), the
update step runs one Bradley-Terry optimizer step per batch on the FSDP2 trainer ranks,
and the evaluation scores the held-out pairs there. There is nothing to sync, score or
estimate: weight_sync, reward and advantage do nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from infra.checkpoint.layout import REWARD_MODEL_STATE_FILE, state_dict_part
from infra.checkpoint.parts import CheckpointPart, WorkerPart
from infra.cluster import ray_cluster
from infra.cluster.cluster_placement import place
from infra.cluster.deadlines import Liveness
from infra.cluster.dispatch import Parts, row_parts, take_rows
from infra.cluster.worker_group import WorkerGroup
from infra.driver.step_runtime import Evaluation, StepResult, StepRuntime
from infra.llm.workers.trainer_rank import setup_trainer
from kinds.reward_model.config import RewardModelConfig
from kinds.reward_model.evaluation import pair_metrics, sample_rows
from kinds.reward_model.worker import RewardModelWorker
from rl_core.config import RLPipeConfig
from rl_core.data import PromptSampler
from rl_core.data.preferences import PreferencePair, load_preference_pairs
from rl_core.models.reward_model import encode_pairs
from rl_core.steps import Step

logger = logging.getLogger(__name__)


class RewardModelRuntime(StepRuntime[RewardModelConfig]):
    """Creates and drives the trainer ranks of a reward-model run.

    Args:
        cfg: The validated run config (a reward model).
    """

    def __init__(self, cfg: RLPipeConfig) -> None:
        from rl_core.models.causal_lm import load_tokenizer

        super().__init__(cfg)
        ray_cluster.connect_cluster(cfg.cluster)
        self.tokenizer = load_tokenizer(cfg.model)
        self.train_pairs, self.eval_pairs = load_preference_pairs(cfg.data)
        self.sampler = PromptSampler(len(self.train_pairs), cfg.data.pairs_per_batch, cfg.run.seed)
        self.timeouts = cfg.timeouts
        world = cfg.actor.num_workers
        self.cluster_placement = place(cfg, {"actor": world})
        plan = self.cluster_placement["actor"]
        self.actor = WorkerGroup(
            "actor",
            RewardModelWorker,
            world,
            plan,
            lambda r: (self.config_dict, r, plan.cpus, world),
            Liveness.from_config(cfg.timeouts),
        )
        self.actor.wait_started(cfg.timeouts.worker_start)
        self.cluster_placement.check_workers(self.groups)
        self._setup_trainer()
        self.batches: list[dict[str, np.ndarray]] = []

    @property
    def groups(self) -> list[WorkerGroup]:
        """The trainer ranks (the run's only group)."""
        return [self.actor]

    def _setup_trainer(self) -> None:
        logger.info(
            "reward-model trainer: %s", setup_trainer(self.actor, self.timeouts.worker_start)
        )

    @classmethod
    def preflight(cls, cfg: RLPipeConfig) -> None:
        """Every row of the preference files is valid (before any worker starts)."""
        train, held = load_preference_pairs(cfg.data)
        logger.info("preference data: %d training and %d held-out pairs", len(train), len(held))

    def encode(self, pairs: list[PreferencePair]) -> dict[str, np.ndarray]:
        """``pairs`` as a tokenized batch (``prompt + response``, right-padded)."""
        return encode_pairs(
            self.tokenizer,
            int(self.tokenizer.pad_token_id),
            [p.prompt for p in pairs],
            [p.chosen for p in pairs],
            [p.rejected for p in pairs],
            self.cfg.data.max_length,
        )

    # -- steps ---------------------------------------------------------------------------
    def weight_sync(self, iteration: int) -> StepResult:
        """Nothing to sync: the trainer ranks also score."""
        return StepResult(0.0)

    def rollout(self, iteration: int) -> StepResult:
        """The next ``actor.steps_per_iteration`` batches of pairs from the data cursor."""
        start = time.perf_counter()
        steps = self.cfg.actor.steps_per_iteration
        picks = [self.sampler.next_indices() for _ in range(steps)]
        self.batches = [self.encode([self.train_pairs[i] for i in rows]) for rows in picks]
        pairs = sum(len(rows) for rows in picks)
        return StepResult(time.perf_counter() - start, env_steps=pairs)

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Nothing to score: preference pairs come labelled."""
        return StepResult(0.0)

    def advantage(self, iteration: int) -> StepResult:
        """Nothing to estimate."""
        return StepResult(0.0)

    def fault_target(self, step: Step) -> Any:
        """The trainer (rank 0) for update, evaluate and checkpoint.

        The other steps call no worker: a fault planned there never fires.
        """
        return self.actor[0] if step in (Step.UPDATE, Step.EVALUATE, Step.CHECKPOINT) else None

    def update(self, iteration: int) -> StepResult:
        """One Bradley-Terry step per batch; each rank trains on its share of every batch."""
        start = time.perf_counter()
        world = len(self.actor)
        # each rank's equal share of every batch (the config makes the batches divide)
        cuts = [
            [take_rows(b, p) for p in row_parts(len(b["chosen_ids"]), world)] for b in self.batches
        ]
        shards = [[cut[rank] for cut in cuts] for rank in range(world)]
        total = self.cfg.data.pairs_per_batch
        metrics = self.actor.train_steps(
            Parts(shards), total, iteration, within=("update", self.timeouts.update)
        )
        return StepResult(time.perf_counter() - start, metrics)

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, iteration: int, results: list[Any] | None = None) -> Evaluation:
        """Pairwise accuracy and reward margin on the held-out pairs, with sample rows."""
        start = time.perf_counter()
        chosen, rejected = self.score(self.eval_pairs, "evaluate")
        metrics = pair_metrics(chosen, rejected)
        rows = sample_rows(self.eval_pairs, chosen, rejected, self.cfg.eval.sample_rows)
        return Evaluation(metrics, rows, seconds=time.perf_counter() - start)

    def score(self, pairs: list[PreferencePair], step: str) -> tuple[np.ndarray, np.ndarray]:
        """Rewards of the chosen and rejected responses of ``pairs`` (every rank scores).

        The pairs are split evenly across ranks; the last rank's share is topped up with
        copies of its first row so that every rank runs the same forward passes.
        """
        world = len(self.actor)
        per_rank = -(-len(pairs) // world)
        padded = pairs + pairs[: per_rank * world - len(pairs)]
        batch = self.encode(padded)
        parts = -(-per_rank // self.cfg.actor.micro_batch_size)
        shards = [
            {k: v[r * per_rank : (r + 1) * per_rank] for k, v in batch.items()}
            for r in range(world)
        ]
        out = self.actor.score(Parts(shards), parts, within=(step, getattr(self.timeouts, step)))
        return out["chosen"][: len(pairs)], out["rejected"][: len(pairs)]

    @classmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Pairwise accuracy and sample rows of the checkpoint's reward model, in this process."""
        from infra.checkpoint.export import policy_from_checkpoint
        from infra.checkpoint.reader import locate_checkpoint
        from kinds.reward_model.evaluation import evaluate_checkpoint_pairs
        from rl_core.config import validate_config

        ref = locate_checkpoint(store_uri, checkpoint["step"], checkpoint.get("trusted", False))
        policy, config, _ = policy_from_checkpoint(ref)
        cfg = validate_config(config, source=f"{ref.location} config.json")
        metrics, rows = evaluate_checkpoint_pairs(policy, cfg)
        metrics.pop("seconds", None)
        pairs = int(metrics["eval/pairs"])
        accuracy = metrics["eval/pairwise_accuracy"]
        return metrics, rows, f"pairwise accuracy {accuracy:.1%} on {pairs} held-out pairs"

    # -- checkpoints ---------------------------------------------------------------------
    def checkpoint_parts(self) -> list[CheckpointPart]:
        """Trainer shards + full weights (collective) and the data cursor."""
        return [
            WorkerPart(self.actor, sharded=True),
            state_dict_part(REWARD_MODEL_STATE_FILE, {"sampler": self.sampler}),
        ]

    def after_checkpoint_loaded(self, step: int) -> None:
        """No batch is in flight after a checkpoint."""
        self.batches = []

    # -- retries -------------------------------------------------------------------------
    def snapshot(self, step: str) -> None:
        """Keep the data cursor (rollout) or the trainer ranks' state (update)."""
        if step == "rollout":
            self._sampler_snapshot = self.sampler.state_dict()
        elif step == "update":
            self.actor.snapshot(within=(step, self.timeouts.update))

    def restore(self, step: str) -> None:
        """Put back what :meth:`snapshot` kept."""
        if step == "rollout":
            self.sampler.load_state_dict(self._sampler_snapshot)
            self.batches = []
        elif step == "update":
            self.actor.restore_snapshot(within=(step, self.timeouts.update))

    # -- recovery ------------------------------------------------------------------------
    def repair(self) -> dict[str, list[int]]:
        """Respawn the whole trainer group when a rank died (its state is lost)."""
        if not self.actor.dead_ranks():
            return {}
        ranks = list(range(len(self.actor)))
        for rank in ranks:
            self.actor.respawn(rank)
        self.actor.wait_started(self.timeouts.worker_start)
        self._setup_trainer()
        return {self.actor.name: ranks}
