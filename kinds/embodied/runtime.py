"""EmbodiedRuntime: env, rollout and trainer worker groups of a control-policy run.

Env workers step vectorized gymnasium envs with actions from rollout workers; the trainer
(actor) applies the reward, computes advantages and runs PPO-style updates. Evaluation
episodes and videos are stateless fan-out jobs on the run's fixed evaluation seeds.

The variations of a run are two strategies chosen once, at start-up: where the rollout
policy lives and how weight syncs reach it (:mod:`kinds.embodied.policy_placement`: the
trainer process, or rollout workers), and when batches are collected
(:mod:`kinds.embodied.collection`: in the rollout step, or ahead of the trainer).
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import numpy as np

from infra.checkpoint.layout import SIGNED_WORKERS, WORKERS_FILE, StatePart
from infra.checkpoint.parts import CheckpointPart, SaveOrder, WorkerPart
from infra.cluster import ray_cluster
from infra.cluster.cluster_placement import place
from infra.cluster.deadlines import Liveness
from infra.cluster.gpu_placement import Attached
from infra.cluster.group_calls import GroupMethod
from infra.cluster.worker_base import Pending
from infra.cluster.worker_group import WorkerGroup
from infra.driver.faults import FIRST_FANOUT_JOB
from infra.driver.step_runtime import (
    Evaluation,
    FanoutJob,
    StepResult,
    StepRuntime,
)
from kinds.embodied.collection import Collection, collection_for
from kinds.embodied.config import EmbodiedConfig
from kinds.embodied.evaluation import (
    combine_episodes,
    evaluate_checkpoint,
    evaluation_jobs,
    video_job,
)
from kinds.embodied.policy_placement import PolicyPlacement, policy_placement
from kinds.embodied.warm_tasks import warm_task_workers
from kinds.embodied.workers.actor_worker import ActorWorker
from kinds.embodied.workers.env_worker import EnvWorker
from kinds.embodied.workers.hybrid_worker import HybridActorWorker
from rl_core.config import RLPipeConfig
from rl_core.seeding import env_reseed
from rl_core.steps import Step

logger = logging.getLogger(__name__)


class EmbodiedRuntime(StepRuntime[EmbodiedConfig]):
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
        # the variations of a run, chosen once: where the rollout policy lives (the
        # trainer, or rollout workers) and when batches are collected (now, or ahead)
        self.policy_placement: PolicyPlacement = policy_placement(cfg)
        self.hybrid = self.policy_placement.hybrid
        sizes = {"env": cfg.env.num_workers, "actor": cfg.actor.num_workers}
        sizes.update(self.policy_placement.sizes(cfg))
        self.placement = self.cluster_placement = place(cfg, sizes, self.attached_groups)
        self.timeouts = cfg.timeouts
        self.liveness = Liveness.from_config(cfg.timeouts)
        self.env = self._group("env", EnvWorker, sizes["env"], with_spaces=False)
        # The trainer (and rollout) processes start and import while the env workers start;
        # their constructors wait for the spaces the first env worker reports.
        self.spaces: Any = Pending(self.env[0].spaces.remote())
        trainer = self.policy_placement.trainer_class(
            self.trainer_worker, self.hybrid_trainer_worker
        )
        self.actor = self._group("actor", trainer, sizes["actor"])
        self.rollout_group = self.policy_placement.start(
            self.actor, lambda name, cls: self._group(name, cls, sizes[name])
        )
        self.collection: Collection = collection_for(cfg, self.env, self.rollout_group, self.actor)
        self.published_version = 0  # the weight version the rollout workers were last given
        self.more_groups: list[WorkerGroup] = self.start_more_groups()
        self.prestart(cfg)  # (done already when the train CLI prestarted it)
        # Wait for every worker to finish start-up (fails fast on config/extension errors).
        self.env.wait_started(cfg.timeouts.worker_start)
        self.spaces = self.spaces.get(timeout=cfg.timeouts.worker_start)
        for group in self.groups[1:]:
            group.wait_started(cfg.timeouts.worker_start)
        self.cluster_placement.check_workers(self.groups)

    def _group(self, name: str, cls: type, size: int, with_spaces: bool = True) -> WorkerGroup:
        """Start the worker group ``name`` on its planned share of the cluster.

        Its workers get the config, their rank and CPUs, and (unless ``with_spaces`` is
        off) the env spaces, read again whenever a worker is respawned.
        """
        share = self.placement[name]

        def args(rank: int) -> tuple[Any, ...]:
            spaces = (self.spaces,) if with_spaces else ()
            return (self.config_dict, rank, share.cpus, *spaces)

        return WorkerGroup(name, cls, size, share, args, self.liveness)

    #: Helper groups of one worker placed with another group's rank 0 (the replay buffer).
    attached_groups: ClassVar[dict[str, Attached]] = {}

    def start_more_groups(self) -> list[WorkerGroup]:
        """Worker groups a subclass adds (started with the others, waited for after them)."""
        return []

    @classmethod
    def prestart(cls, cfg: RLPipeConfig) -> None:
        """Warm the evaluation's task workers (``eval.num_tasks``) for the first evaluation."""
        warm_task_workers(cfg.eval.num_tasks)

    @property
    def groups(self) -> list[WorkerGroup]:
        """Every worker group of the run."""
        return [self.env, self.actor, *self.policy_placement.own_groups, *self.more_groups]

    # -- steps ---------------------------------------------------------------------------
    def fault_target(self, step: Step) -> Any:
        """The first env worker (rollout), the first evaluation task, else the trainer."""
        if step is Step.ROLLOUT:
            return self.env[0]
        if step is Step.EVALUATE:
            return FIRST_FANOUT_JOB
        return self.actor[0]

    def weight_sync(self, iteration: int) -> StepResult:
        """Bring the trainer's weights to whatever serves rollout inference."""
        bucket_mb = self.cfg.rollout.weight_sync_bucket_mb
        result = self.policy_placement.weight_sync(self.actor, self.timeouts.weight_sync, bucket_mb)
        self.published_version = int(result.info["version"])
        return result

    def rollout(self, iteration: int) -> StepResult:
        """Collect the iteration's batch and hand it to the trainer.

        Sync mode runs every env worker's rollout loop now; async mode takes the batch
        launched ``algorithm.max_staleness`` iterations ago and launches the next one
        (:mod:`kinds.embodied.collection`).
        """
        start = time.perf_counter()
        stats, metrics = self.collection.collect(iteration, self.published_version)
        returns = [r for s in stats for r in s["episode_returns"]]
        lengths = [n for s in stats for n in s["episode_lengths"]]
        successes = [x for s in stats for x in s.get("episode_successes", [])]
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
        if successes:
            metrics["env/success_rate"] = float(np.mean(successes))
        return StepResult(seconds, metrics, env_steps=int(env_steps))

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Apply the reward function on the trainer's batch (``results`` is unused)."""
        return self._timed("reward", self.actor.apply_reward)

    def advantage(self, iteration: int) -> StepResult:
        """Compute advantages and returns on the trainer."""
        return self._timed("advantage", self.actor.compute_advantages)

    def update(self, iteration: int) -> StepResult:
        """Update the policy on the trainer."""
        return self._timed("update", self.actor.update, iteration)

    def sft_step(self, iteration: int) -> StepResult:
        """Behaviour cloning on the demonstrations (``rlpipe sft`` with an embodied preset)."""
        start = time.perf_counter()
        metrics = self.actor.sft_update(iteration, within=("update", self.timeouts.update))[0]
        samples = int(metrics.pop("samples"))
        return StepResult.of(time.perf_counter() - start, metrics, env_steps=samples)

    def _timed(self, step: str, method: GroupMethod, *args: Any) -> StepResult:
        """``method`` of the trainer called within ``step``'s deadline, timed."""
        start = time.perf_counter()
        results = method(*args, within=(step, getattr(self.timeouts, step)))
        return StepResult.of(time.perf_counter() - start, results[0])

    def policy_weights_ref(self) -> Any:
        """ObjectRef of the trainer's weights (numpy state dict) for evaluation tasks."""
        return self.actor[0].get_state_dict.remote()

    # -- evaluation (kinds/embodied/evaluation.py) ---------------------------------------
    def evaluation_jobs(self, iteration: int) -> list[FanoutJob]:
        """Deterministic episodes on the fixed evaluation seeds, in ``eval.num_tasks`` parts."""
        return evaluation_jobs(self.cfg, self.config_dict, self.policy_weights_ref())

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
    def checkpoint_parts(self) -> list[CheckpointPart]:
        """The trainer, the batches collected ahead (if any), env states and generators.

        The trainer writes its files while the driver gathers the rest; the batches are
        settled before the env states are read (settling may rewind env workers).
        """
        parts: list[CheckpointPart] = [WorkerPart(self.actor, SaveOrder.ALONGSIDE)]
        pipeline = self.collection.checkpoint_part()
        if pipeline is not None:
            parts.append(pipeline)
        parts.append(
            StatePart(WORKERS_FILE, SIGNED_WORKERS, self._worker_states, self._put_worker_states)
        )
        return parts

    def _worker_states(self) -> tuple[list[Any], list[Any]]:
        """Every env worker's state and every rollout worker's sampling generator."""
        timeout = self.timeouts.checkpoint
        env_states = self.env.get_state(within=("checkpoint", timeout))
        rng_states = self.rollout_group.get_rng_state(within=("checkpoint", timeout))
        return env_states, rng_states

    def _put_worker_states(self, states: tuple[list[Any], list[Any]], step: int) -> None:
        """Env workers take their states, rollout workers their generators.

        An env worker without a state (an env that could not be pickled) is reseeded.
        """
        env_states, rng = states
        timeout = self.timeouts.checkpoint
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

    def _reseed(self, rank: int, step: int) -> int:
        return env_reseed(self.cfg.run.seed, rank, self.cfg.env.num_envs, step)

    # -- retries -------------------------------------------------------------------------
    def _trainer_state(self, step: str) -> list[tuple[GroupMethod, GroupMethod]]:
        """``(snapshot, restore)`` methods of each group whose state a trainer step changes."""
        return [(self.actor.snapshot, self.actor.restore_snapshot)]

    def snapshot(self, step: str) -> None:
        """What a rollout (:mod:`kinds.embodied.collection`) or trainer step changes."""
        if step == "rollout":
            self.collection.snapshot()
            return
        for method, _ in self._trainer_state(step):
            method(within=(step, self._trainer_timeout(step)))

    def restore(self, step: str) -> None:
        """Put back the state kept by :meth:`snapshot`."""
        if step == "rollout":
            self.collection.restore()
            return
        for _, method in self._trainer_state(step):
            method(within=(step, self._trainer_timeout(step)))

    def _trainer_timeout(self, step: str) -> float:
        """The deadline of a trainer step (behaviour cloning has the update's)."""
        return self.timeouts.update if step == "sft_update" else getattr(self.timeouts, step)

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
