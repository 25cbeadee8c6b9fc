"""EmbodiedRuntime: env, rollout and trainer worker groups of a control-policy run.

Env workers step vectorized gymnasium envs with actions from rollout workers; the trainer
(actor) applies the reward, computes advantages and runs PPO-style updates. Evaluation
episodes and videos are stateless fan-out jobs on the run's fixed evaluation seeds.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import numpy as np

from infra.checkpoint.store import open_store, step_dir_name
from infra.checkpoint.worker_state import WORKERS_FILE, decode_workers_state, encode_workers_state
from infra.cluster import ray_cluster
from infra.cluster.cluster_placement import place
from infra.cluster.deadlines import Liveness, wait_for
from infra.cluster.gpu_placement import Attached
from infra.cluster.worker_base import Pending
from infra.cluster.worker_group import WorkerGroup
from infra.driver.rollout_pipeline import (
    PIPELINE_FILE,
    RolloutPipeline,
    load_pipeline,
    pipeline_bytes,
)
from infra.driver.step_runtime import (
    Evaluation,
    FanoutJob,
    StepResult,
    StepRuntime,
)
from infra.embodied.evaluation import (
    combine_episodes,
    evaluate_checkpoint,
    evaluation_jobs,
    video_job,
)
from infra.embodied.warm_tasks import warm_task_workers
from infra.embodied.workers.actor_worker import ActorWorker
from infra.embodied.workers.env_worker import EnvWorker
from infra.embodied.workers.hybrid_worker import HybridActorWorker
from infra.embodied.workers.rollout_worker import RolloutWorker
from rl_core.config import RLPipeConfig
from rl_core.config.hybrid import uses_hybrid_engine
from rl_core.seeding import env_reseed

logger = logging.getLogger(__name__)


class EmbodiedRuntime(StepRuntime):
    """Creates and drives the env, rollout and actor worker groups of a run.

    Args:
        cfg: The validated run config.
    """

    #: Trainer worker classes: separate rollout workers, and the hybrid engine.
    trainer_worker: type = ActorWorker
    hybrid_trainer_worker: type = HybridActorWorker

    def __init__(self, cfg: RLPipeConfig) -> None:
        super().__init__(cfg)
        ray_cluster.connect_cluster(cfg.cluster)
        self.hybrid = uses_hybrid_engine(cfg)
        sizes = {"env": cfg.env.num_workers, "actor": cfg.actor.num_workers}
        if not self.hybrid:
            sizes["rollout"] = cfg.rollout.num_workers
        self.placement = self.cluster_placement = place(cfg, sizes, self.attached_groups)
        self.timeouts = cfg.timeouts
        liveness = Liveness.from_config(cfg.timeouts)
        if self.hybrid:
            logger.info("hybrid engine: rollout policy inside the trainer process")
        self.env = WorkerGroup(
            "env",
            EnvWorker,
            sizes["env"],
            self.placement["env"],
            lambda r: (self.config_dict, r, self.placement["env"].cpus),
            liveness,
        )
        # The trainer (and rollout) processes start and import while the env workers start;
        # their constructors wait for the spaces the first env worker reports.
        self.spaces: Any = Pending(self.env[0].spaces.remote())
        self.actor = WorkerGroup(
            "actor",
            self.hybrid_trainer_worker if self.hybrid else self.trainer_worker,
            sizes["actor"],
            self.placement["actor"],
            lambda r: (self.config_dict, r, self.placement["actor"].cpus, self.spaces),
            liveness,
        )
        # hybrid: the trainer answers the env workers' predict calls itself
        self.rollout_group = self.actor
        if not self.hybrid:
            self.rollout_group = WorkerGroup(
                "rollout",
                RolloutWorker,
                sizes["rollout"],
                self.placement["rollout"],
                lambda r: (self.config_dict, r, self.placement["rollout"].cpus, self.spaces),
                liveness,
            )
        self.pipeline: RolloutPipeline | None = None
        if cfg.run.mode == "async":
            self.pipeline = RolloutPipeline(cfg.algorithm.max_staleness)
            logger.info(
                "async mode: batches collected up to %d weight version(s) ahead of the trainer",
                cfg.algorithm.max_staleness,
            )
        self.published_version = 0  # the weight version the rollout workers were last given
        self.more_groups: list[WorkerGroup] = self.start_more_groups(liveness)
        self.prestart(cfg)  # (done already when the train CLI prestarted it)
        # Wait for every worker to finish start-up (fails fast on config/extension errors).
        self.env.wait_started(cfg.timeouts.worker_start)
        self.spaces = self.spaces.get(timeout=cfg.timeouts.worker_start)
        for group in self.groups[1:]:
            group.wait_started(cfg.timeouts.worker_start)
        self.cluster_placement.check_workers(self.groups)

    #: Helper groups of one worker placed with another group's rank 0 (the replay buffer).
    attached_groups: ClassVar[dict[str, Attached]] = {}

    def start_more_groups(self, liveness: Liveness) -> list[WorkerGroup]:
        """Worker groups a subclass adds (started with the others, waited for after them)."""
        return []

    @classmethod
    def prestart(cls, cfg: RLPipeConfig) -> None:
        """Warm the evaluation's task workers (``eval.num_tasks``) for the first evaluation."""
        warm_task_workers(cfg.eval.num_tasks)

    @property
    def groups(self) -> list[WorkerGroup]:
        """Every worker group of the run."""
        rollout = [] if self.hybrid else [self.rollout_group]
        return [self.env, self.actor, *rollout, *self.more_groups]

    # -- steps ---------------------------------------------------------------------------
    def weight_sync(self, iteration: int) -> StepResult:
        """Push the trainer's weights to every rollout worker."""
        start = time.perf_counter()
        self.faults.arm("weight_sync", iteration, self.actor[0])
        timeout = self.timeouts.weight_sync
        if self.hybrid:
            (out,) = self.actor.call_within("weight_sync", timeout, "sync_rollout_weights")
            self.published_version = int(out["version"])
            return StepResult(
                time.perf_counter() - start,
                {"rollout/weight_sync_bytes": 0.0, "rollout/weight_sync_buckets": 0.0},
                info={"version": out["version"], "rollout_versions": [out["version"]]},
            )
        (out,) = self.actor.get(
            [self.actor[0].get_weight_buckets.remote(self.cfg.rollout.weight_sync_bucket_mb)],
            timeout,
            "weight_sync",
            ranks=[0],
        )
        versions = self.rollout_group.call_within(
            "weight_sync", timeout, "load_weights", out["refs"], out["version"]
        )
        self.published_version = int(out["version"])
        return StepResult(
            time.perf_counter() - start,
            {
                "rollout/weight_sync_bytes": float(out["bytes"]),
                "rollout/weight_sync_buckets": float(len(out["refs"])),
            },
            info={"version": out["version"], "rollout_versions": versions},
        )

    def _launch(
        self, index: int | None = None, version: int | None = None
    ) -> list[tuple[Any, Any]]:
        """Start every env worker's rollout loop; ``(batch, stats)`` refs per env worker.

        Args:
            index: Async mode: the batch's index (env workers keep their state from before
                it, for a retry).
            version: Async mode: the weight version its actions are sampled with.
        """
        return [
            h.interact.options(num_returns=2).remote(
                self.rollout_group[i % len(self.rollout_group)],
                self.cfg.rollout.num_steps,
                version,
                index,
            )
            for i, h in enumerate(self.env.handles)
        ]

    def _collect(self, pairs: list[tuple[Any, Any]]) -> list[dict[str, Any]]:
        """Wait for the launched rollout loops and hand their batches to the trainer."""
        # an env worker waits on its rollout worker: a deadline kills both
        owners = [
            (self.env.owners([i])[0], self.rollout_group.owners([i % len(self.rollout_group)])[0])
            for i in range(len(self.env))
        ]
        timeout = self.timeouts.rollout
        stats = wait_for([p[1] for p in pairs], owners, timeout, "rollout", self.env.liveness)
        self.actor.call_within("rollout", timeout, "receive_batch", *[p[0] for p in pairs])
        return stats

    def rollout(self, iteration: int) -> StepResult:
        """Collect the iteration's batch and hand it to the trainer.

        Sync mode runs every env worker's rollout loop now; async mode takes the batch
        launched ``algorithm.max_staleness`` iterations ago and launches the next one
        (:mod:`infra.driver.rollout_pipeline`).
        """
        start = time.perf_counter()
        self.faults.arm("rollout", iteration, self.env[0])
        metrics: dict[str, float] = {}
        if self.pipeline is None:
            stats = self._collect(self._launch())
        else:
            self.pipeline.fill(iteration, self.published_version, self._launch)
            chunk = self.pipeline.take(iteration)
            waited = time.perf_counter()
            stats = self._collect(chunk.pairs)
            staleness = float(self.published_version - chunk.version)
            metrics = {
                "async/staleness_mean": staleness,
                "async/staleness_max": staleness,
                "async/buffer_fill": len(self.pipeline.chunks) / max(self.pipeline.staleness, 1),
                "async/trainer_idle_seconds": time.perf_counter() - waited,
                "async/rollout_idle_seconds": self.pipeline.idle_seconds(stats),
            }
        returns = [r for s in stats for r in s["episode_returns"]]
        lengths = [n for s in stats for n in s["episode_lengths"]]
        env_steps = sum(s["env_steps"] for s in stats)
        seconds = time.perf_counter() - start
        metrics.update(
            {
                "env/episodes": float(len(returns)),
                "rollout/steps_per_second": env_steps / max(seconds, 1e-9),
                "env/step_seconds": float(max(s.get("env_seconds", 0.0) for s in stats)),
            }
        )
        if returns:
            metrics["env/episode_return_mean"] = float(np.mean(returns))
            metrics["env/episode_length_mean"] = float(np.mean(lengths))
        return StepResult(seconds, metrics, env_steps=int(env_steps))

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Apply the reward function on the trainer's batch (``results`` is unused)."""
        self.faults.arm("reward", iteration, self.actor[0])
        return self._timed_actor_call("reward", "apply_reward")

    def advantage(self, iteration: int) -> StepResult:
        """Compute advantages and returns on the trainer."""
        self.faults.arm("advantage", iteration, self.actor[0])
        return self._timed_actor_call("advantage", "compute_advantages")

    def update(self, iteration: int) -> StepResult:
        """Update the policy on the trainer."""
        self.faults.arm("update", iteration, self.actor[0])
        return self._timed_actor_call("update", "update", iteration)

    def _timed_actor_call(self, step: str, method: str, *args: Any) -> StepResult:
        start = time.perf_counter()
        results = self.actor.call_within(step, getattr(self.timeouts, step), method, *args)
        return StepResult.of(time.perf_counter() - start, results[0])

    def policy_weights_ref(self) -> Any:
        """ObjectRef of the trainer's weights (numpy state dict) for evaluation tasks."""
        return self.actor[0].get_state_dict.remote()

    # -- evaluation (infra/embodied/evaluation.py) ---------------------------------------
    def evaluation_jobs(self, iteration: int) -> list[FanoutJob]:
        """Deterministic episodes on the fixed evaluation seeds, in ``eval.num_tasks`` parts."""
        fault = self.faults.task_fault("evaluate", iteration)
        return evaluation_jobs(self.cfg, self.config_dict, self.policy_weights_ref(), fault)

    def evaluate(self, iteration: int, results: list[Any] | None) -> Evaluation:
        """Combine the episode jobs' returns and lengths into ``eval/*`` metrics."""
        return combine_episodes(results or [])

    def video_job(self, iteration: int) -> FanoutJob | None:
        """Render the current policy on the first evaluation seed."""
        return video_job(self.cfg, self.config_dict, self.policy_weights_ref())

    @classmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Deterministic episodes of the checkpoint's policy, split like in training."""
        return evaluate_checkpoint(checkpoint, episodes)

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self, store_uri: str, step: int) -> dict[str, Any]:
        """Write every worker's state for ``step`` (not yet committed)."""
        start = time.perf_counter()
        self.faults.arm("checkpoint", step - 1, self.actor[0])
        folder = step_dir_name(step)
        store = open_store(store_uri)
        timeout = self.timeouts.checkpoint
        refs = self.actor.call("save_checkpoint", store_uri, folder)
        pipeline = None
        if self.pipeline is not None:  # batches collected ahead are part of the run's state
            self.pipeline.drain(timeout)
            self._rewind_envs(self.pipeline.forget_failed(), "checkpoint")
            pipeline = pipeline_bytes(self.pipeline)
        env_states = self.env.call_within("checkpoint", timeout, "get_state")
        rng_states = self.rollout_group.call_within("checkpoint", timeout, "get_rng_state")
        # the trainer's files first: it refuses non-finite weights, and then nothing else is
        # written into the step folder
        self.actor.get(refs, timeout, "checkpoint")
        store.write_bytes(f"{folder}/{WORKERS_FILE}", encode_workers_state(env_states, rng_states))
        if pipeline is not None:
            store.write_bytes(f"{folder}/{PIPELINE_FILE}", pipeline)
        return {"seconds": time.perf_counter() - start, "dir": folder}

    def load_checkpoint(self, store_uri: str, folder: str, step: int) -> None:
        """Restore every worker from a committed checkpoint folder."""
        store = open_store(store_uri)
        timeout = self.timeouts.checkpoint
        path = f"{folder}/{WORKERS_FILE}"  # verified before any worker loads anything
        env_states, rng = decode_workers_state(
            store.read_bytes(path), f"{store.uri}/{path}", self.cfg.run.trust_checkpoint
        )
        self.actor.call_within("checkpoint", timeout, "load_checkpoint", store_uri, folder)
        self.env.get(
            [
                h.set_state.remote(
                    env_states[i] if i < len(env_states) else None, self._reseed(i, step)
                )
                for i, h in enumerate(self.env.handles)
            ],
            timeout,
            "checkpoint",
        )
        self.rollout_group.get(
            [
                h.set_rng_state.remote(rng[i % len(rng)])
                for i, h in enumerate(self.rollout_group.handles)
            ],
            timeout,
            "checkpoint",
        )
        if self.pipeline is not None:
            staleness = self.cfg.algorithm.max_staleness
            self.pipeline = load_pipeline(store_uri, folder, staleness, step)

    def _reseed(self, rank: int, step: int) -> int:
        return env_reseed(self.cfg.run.seed, rank, self.cfg.env.num_envs, step)

    # -- retries -------------------------------------------------------------------------
    def _step_state(self, step: str) -> list[tuple[WorkerGroup, str, str]]:
        """``(group, snapshot method, restore method)`` of the state ``step`` changes."""
        if step == "rollout":
            return [
                (self.env, "snapshot", "restore_snapshot"),
                (self.rollout_group, "snapshot_rollout", "restore_rollout"),
            ]
        return [(self.actor, "snapshot", "restore_snapshot")]

    def snapshot(self, step: str) -> None:
        """Env and sampling state before a rollout; trainer state before an update.

        In async mode a rollout keeps only the set of launched batches: env workers keep
        their env and sampling state from before each batch themselves.
        """
        if step == "rollout" and self.pipeline is not None:
            self._pipeline_kept = self.pipeline.snapshot()
            return
        for group, method, _ in self._step_state(step):
            group.call_within(step, getattr(self.timeouts, step), method)

    def restore(self, step: str) -> None:
        """Put back the state kept by :meth:`snapshot`.

        In async mode the launched batches are waited for (none may step the envs after
        this); collected ones are kept, and from the first that failed on, the batches are
        forgotten and the env workers put back their state from before it: the retried
        step launches them again, with the same weight versions.
        """
        if step == "rollout" and self.pipeline is not None:
            self.pipeline.drain(self.timeouts.rollout)
            self._rewind_envs(self.pipeline.restore(self._pipeline_kept), step)
            return
        for group, _, method in self._step_state(step):
            group.call_within(step, getattr(self.timeouts, step), method)

    def _rewind_envs(self, index: int | None, step: str) -> None:
        """Env workers put back their env and sampling state from before batch ``index``."""
        if index is None:
            return
        self.env.get(
            [
                h.rewind.remote(self.rollout_group[i % len(self.rollout_group)], index)
                for i, h in enumerate(self.env.handles)
            ],
            getattr(self.timeouts, step),
            step,
        )

    # -- recovery ------------------------------------------------------------------------
    def repair(self) -> dict[str, list[int]]:
        """Respawn dead workers (blank: the caller restores a checkpoint)."""
        rebuilt: dict[str, list[int]] = {}
        for group in self.groups:
            dead = group.dead_ranks()
            for rank in dead:
                group.respawn(rank)
            if dead:
                rebuilt[group.name] = dead
        for group in self.groups:
            group.wait_started(self.timeouts.worker_start)
        return rebuilt
