"""ReasoningRuntime: the worker groups of an LLM reasoning run and the steps tasks call.

The step contract of :class:`infra.driver.step_runtime.StepRuntime` for causal LMs:
prompts come from the ``data`` section, rollout workers sample ``algorithm.group_size``
responses per prompt, rewards are scored by fan-out tasks, advantages are computed here,
and trainer ranks (FSDP2 or megatron, ``actor.backend``) update the policy. Tensor-parallel
peers of a megatron trainer get the same rows (:class:`~rl_core.training.parallel_layout.
ParallelLayout`); their answers are read once.

What varies between runs is chosen once, at start-up: where the rollout engines and reference
live (:mod:`kinds.reasoning.engine_layouts`: hybrid engine or separate workers) and how the
rollout step gets its batch (:class:`~kinds.reasoning.sync_generation.SyncGeneration`, or
batches launched ahead by :class:`~kinds.reasoning.pipelined_generation.PipelinedGeneration`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from infra.checkpoint.layout import REASONING_STATE_FILE, state_dict_part
from infra.checkpoint.parts import CheckpointPart, WorkerPart
from infra.cluster import ray_cluster
from infra.cluster.worker_group import WorkerGroup
from infra.driver.faults import FIRST_FANOUT_JOB
from infra.driver.step_runtime import (
    Evaluation,
    FanoutJob,
    StepResult,
    StepRuntime,
)
from infra.llm.engines import check_rollout_engine
from infra.llm.workers.trainer_rank import setup_trainer
from kinds.reasoning.advantage_step import advantage_step
from kinds.reasoning.config import ReasoningConfig
from kinds.reasoning.engine_layouts import Engines, SyncProbe, engines_for
from kinds.reasoning.evaluation import evaluate_heldout
from kinds.reasoning.model_reward_step import (
    ModelRewardScorer,
    rule_jobs,
    score_now,
)
from kinds.reasoning.pipelined_generation import PipelinedGeneration
from kinds.reasoning.responses import ResponseBatch, reward_chunk, sampling_params
from kinds.reasoning.reward_model_source import check_model_source
from kinds.reasoning.reward_step import reward_jobs, reward_step
from kinds.reasoning.rollout_source import Generation, RolloutSource, TrainPrompts, generate_split
from kinds.reasoning.sft_steps import sft_step
from kinds.reasoning.sync_generation import SyncGeneration
from kinds.reasoning.update_step import update_step
from kinds.reasoning.worker_groups import start_reasoning_groups
from rl_core.agents.metrics import trajectory_metrics_by_kind
from rl_core.config import RLPipeConfig
from rl_core.data import PromptSampler
from rl_core.llm.prompting import fit_prompts, load_task_samples
from rl_core.llm.sync_probe import probe_atol, probe_tokens
from rl_core.rewards.model_reward import reward_plan
from rl_core.steps import Step
from rl_core.training.parallel_layout import ParallelLayout

logger = logging.getLogger(__name__)


class ReasoningRuntime(StepRuntime[ReasoningConfig]):
    """Creates and drives the trainer, rollout and reference worker groups of an LLM run.

    Args:
        cfg: The validated run config (a reasoning model).
    """

    spaces = None  # no env spaces: the model builder does not need any

    def __init__(self, cfg: RLPipeConfig) -> None:
        from rl_core.models.causal_lm import load_tokenizer

        super().__init__(cfg)
        ray_cluster.connect_cluster(cfg.cluster)
        self.tokenizer = load_tokenizer(cfg.model)
        train, held = load_task_samples(cfg.data)
        train, self.train_prompts = fit_prompts(train, cfg.data, self.tokenizer)
        held, self.eval_prompts = fit_prompts(held, cfg.data, self.tokenizer)
        self.train_samples, self.eval_samples = train, held
        self.sampler = PromptSampler(len(train), cfg.data.prompts_per_batch, seed=cfg.run.seed)
        self.timeouts = cfg.timeouts
        self.sync_probe = (
            SyncProbe(probe_tokens(self.tokenizer), probe_atol(cfg), cfg.actor.lora.enabled)
            if cfg.rollout.sync_probe
            else None
        )
        self.reward_plan = reward_plan(cfg.reward)
        if self.reward_plan.uses_model:  # the model is there before any worker starts
            check_model_source(cfg.reward.model)
        workers = start_reasoning_groups(cfg, self.config_dict, self.cpus_outside_groups(cfg))
        self.model_reward = (
            ModelRewardScorer(workers.reward, cfg.reward.model) if workers.reward else None
        )
        self.cluster_placement = workers.placement
        self.engines: Engines = engines_for(workers)  # hybrid engine or separate workers
        self.actor, self.rollout_group = workers.actor, self.engines.rollout
        self.layout = ParallelLayout(len(self.actor), cfg.actor.tensor_parallel_size)
        for group in self.groups:
            group.wait_started(cfg.timeouts.worker_start)
        self.cluster_placement.check_workers(self.groups)
        self._setup_trainer()
        self.batch = ResponseBatch()
        self.published_version = 0  # the weight version the rollout workers were last given
        self.generation = self._choose_generation()  # sync, or batches launched ahead

    @classmethod
    def cpus_outside_groups(cls, cfg: RLPipeConfig) -> float:
        """CPUs the run's processes outside its worker groups need (none here)."""
        return 0.0

    def _choose_generation(self) -> Generation:
        cfg = self.cfg
        prompts = TrainPrompts(
            self.train_samples,
            self.train_prompts,
            self.sampler,
            cfg.algorithm.group_size,
            cfg.run.seed,
        )
        source = RolloutSource(
            self.engines.rollout,
            prompts,
            self.sampling_params,
            self.timeouts.rollout,
            self.agent_section,
        )
        if cfg.run.mode != "async":
            return SyncGeneration(
                source, cfg.data.prompts_per_batch, cfg.algorithm, self.score_in_process
            )
        logger.info(
            "async mode: batches generated up to %d weight version(s) ahead of the trainer",
            cfg.algorithm.max_staleness,
        )
        return PipelinedGeneration(
            source, cfg.algorithm.max_staleness, cfg.rollout.partial_rollout_tokens
        )

    @property
    def hybrid(self) -> bool:
        """Whether rollout engines and reference live in the trainer ranks."""
        return self.engines.hybrid

    @property
    def groups(self) -> list[WorkerGroup]:
        """Every worker group of the run."""
        return self.engines.groups

    def _setup_trainer(self) -> None:
        logger.info("trainer: %s", setup_trainer(self.actor, self.timeouts.worker_start))

    # -- steps ---------------------------------------------------------------------------
    @classmethod
    def preflight(cls, cfg: RLPipeConfig) -> None:
        """The rollout engine is importable and every prompt file row is valid."""
        check_rollout_engine(cfg)
        section = cfg.reward.model
        if section is not None and section.uri:  # a preset's export may still be trained
            check_model_source(section)
        train, held = load_task_samples(cfg.data)
        logger.info("prompt data: %d training and %d held-out prompts", len(train), len(held))

    def fault_target(self, step: Step) -> Any:
        """Where a step's injected fault strikes: its first worker or task.

        The first rollout worker for rollout and evaluate; for reward the first reward-model
        worker, or the first reward task when no reward model scores; else the trainer
        (rank 0).
        """
        if step in (Step.ROLLOUT, Step.EVALUATE):
            return self.rollout_group[0]
        if step is Step.REWARD:
            return FIRST_FANOUT_JOB if self.model_reward is None else self.model_reward.group[0]
        return self.actor[0]

    def weight_sync(self, iteration: int) -> StepResult:
        """Trainer → rollout engines: in memory (hybrid engine) or through the object store."""
        start = time.perf_counter()
        synced = self.engines.sync_weights(self.timeouts.weight_sync, self.sync_probe)
        self.published_version = synced.version
        return StepResult(time.perf_counter() - start, synced.metrics, info=synced.info)

    def sampling_params(self, greedy: bool = False) -> dict[str, Any]:
        """``SamplingParams`` fields from the ``rollout`` section (greedy for evaluation)."""
        return sampling_params(self.cfg.rollout, int(self.tokenizer.eos_token_id), greedy)

    def generate(
        self,
        prompts: list[list[int]],
        sampling: dict[str, Any],
        seed: int,
        step: str = "rollout",
    ) -> tuple[dict[str, list], float]:
        """Generate one response per prompt, the prompts split across rollout workers.

        Args:
            prompts: Token ids of each prompt.
            sampling: ``SamplingParams`` fields.
            seed: Seed of this generation (each worker derives its own from it).
            step: The step generating (its ``timeouts`` field is the deadline).
        """
        timeout = getattr(self.timeouts, step)
        return generate_split(
            self.engines.rollout, prompts, sampling, seed, timeout, step, self.agent_section
        )

    @property
    def agent_section(self) -> dict[str, Any] | None:
        """The ``agent`` section as a dict when an agent loop makes trajectories, else None."""
        return self.config_dict["agent"] if self.cfg.agent.multi_turn else None

    def rollout(self, iteration: int) -> StepResult:
        """Sample responses for the next prompts (DAPO: keep only informative groups).

        Async mode takes the batch launched ``algorithm.max_staleness`` iterations ago and
        launches the next one (:mod:`kinds.reasoning.pipelined_generation`).
        """
        start = time.perf_counter()
        self.batch, metrics, rounds = self.generation.take(iteration, self.published_version)
        seconds = time.perf_counter() - start
        lengths = [len(r) for r in self.batch.response_ids]
        metrics |= {
            "rollout/response_length_mean": float(np.mean(lengths)),
            "rollout/truncated_fraction": 1.0 - float(np.mean(self.batch.finished)),
            "rollout/tokens_per_second": sum(lengths) * rounds / max(seconds, 1e-9),
            "rollout/generation_rounds": float(rounds),
        }
        kinds = [sample.fields.get("kind") for sample in self.batch.samples]
        metrics |= trajectory_metrics_by_kind(self.batch.trajectories, kinds)  # agent loops
        return StepResult(seconds, metrics, env_steps=len(self.batch))

    def reward_chunk(self, batch: ResponseBatch, rows: list[int]) -> dict[str, list[Any]]:
        """``rows`` of ``batch`` as reward keywords (completions decoded)."""
        return reward_chunk(self.tokenizer, batch, rows)

    def score_in_process(self, batch: ResponseBatch) -> list[float]:
        """Rewards of ``batch`` scored now, in this process and the reward-model workers.

        For dynamic sampling and evaluation; a model failure's reward is NaN.
        """
        return score_now(self, batch, self.timeouts.reward)

    def reward_jobs(self, iteration: int) -> list[FanoutJob]:
        """Chunks of the batch for the reward fan-out tasks (``reward.num_tasks`` of them).

        With a model reward the jobs score the rule components only (the reward-model
        workers score the rest in :meth:`reward`, and an injected ``reward`` fault strikes
        the first reward-model worker: :meth:`fault_target`).
        """
        reward_cfg, tasks = self.config_dict["reward"], self.cfg.reward.num_tasks
        if self.model_reward is not None:
            return rule_jobs(self.batch, self.tokenizer, reward_cfg, self.reward_plan, tasks)
        return reward_jobs(self.batch, self.tokenizer, reward_cfg, tasks)

    def reward(self, iteration: int, results: list[Any] | None = None) -> StepResult:
        """Collect the fan-out tasks' scores (:func:`~kinds.reasoning.reward_step.reward_step`)."""
        return reward_step(self, iteration, results)

    def advantage(self, iteration: int) -> StepResult:
        """Trainer and reference log-probs, token rewards, advantages (``advantage_step``)."""
        return advantage_step(self, iteration)

    def update(self, iteration: int) -> StepResult:
        """Shuffle rows, shard them across trainer ranks, update; metrics reduced over replicas."""
        cfg = self.cfg
        return update_step(
            self.actor,
            self.layout,
            self.batch,
            cfg.actor,
            cfg.run.seed,
            iteration,
            self.timeouts.update,
        )

    # -- supervised warm start -------------------------------------------------------------
    def sft_step(self, iteration: int) -> StepResult:
        """Supervised steps of one SFT iteration (see :func:`kinds.reasoning.sft_steps.sft_step`)."""
        return sft_step(self, iteration)

    # -- evaluation -----------------------------------------------------------------------
    def evaluation_jobs(self, iteration: int) -> list[FanoutJob]:
        """No jobs: the weights being evaluated go to the rollout engines first.

        (The update may follow the last sync.) The step's injected fault is armed after
        this sync, so that it strikes the held-out generation of :meth:`evaluate`.
        """
        self.weight_sync(-1)
        return []

    def evaluate(self, iteration: int, results: list[Any] | None = None) -> Evaluation:
        """Greedy accuracy and pass@k on the held-out prompts, with sample rows."""
        metrics, rows = evaluate_heldout(self, iteration)
        return Evaluation(metrics, rows, seconds=metrics.pop("seconds"))

    @classmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Greedy accuracy, pass@k and sample rows of the checkpoint's LM, in this process."""
        from infra.checkpoint.reader import locate_checkpoint
        from kinds.reasoning.checkpoint_eval import CheckpointEvaluator

        step, trusted = checkpoint["step"], checkpoint.get("trusted", False)
        ref = locate_checkpoint(store_uri, step, trusted)
        metrics, rows = CheckpointEvaluator(ref).evaluate(step)
        metrics.pop("seconds", None)
        prompts = int(metrics["eval/prompts"])
        headline = f"accuracy {metrics['eval/accuracy']:.1%} on {prompts} held-out prompts"
        return metrics, rows, headline

    # -- checkpoints ---------------------------------------------------------------------
    def checkpoint_parts(self) -> list[CheckpointPart]:
        """Trainer shards + full weights (collective), the generation's state, the cursor.

        The generation's state is gathered before the prompt cursor (settling batches
        launched ahead may put the cursor back) and put back after it.
        """
        generation = self.generation.checkpoint_part(self.timeouts.checkpoint)
        return [
            WorkerPart(self.actor, sharded=True),
            *([generation] if generation is not None else []),
            state_dict_part(REASONING_STATE_FILE, {"sampler": self.sampler}),
        ]

    def after_checkpoint_loaded(self, step: int) -> None:
        """No batch is in flight after a checkpoint."""
        self.batch = ResponseBatch()

    # -- retries -------------------------------------------------------------------------
    def snapshot(self, step: str) -> None:
        """Keep what ``step`` changes: the prompt cursor, the trainer ranks' state, or both.

        A rollout moves the cursor, an update the trainer; a supervised step moves both.
        """
        if step == "rollout":
            self.generation.snapshot()
        elif step == "sft_update":
            self._sampler_snapshot = self.sampler.state_dict()
        if step in ("update", "sft_update"):
            self.actor.snapshot(within=(step, self.timeouts.update))

    def restore(self, step: str) -> None:
        """Put back the state kept by :meth:`snapshot`."""
        if step in ("rollout", "sft_update"):
            self.batch = ResponseBatch()
            if step == "rollout":
                self.generation.restore(self.timeouts.rollout)  # puts back the prompt cursor
            else:
                self.sampler.load_state_dict(self._sampler_snapshot)
        if step in ("update", "sft_update"):
            self.actor.restore_snapshot(within=(step, self.timeouts.update))

    def before_retry(self, step: str) -> None:
        """A retried weight sync sends full weights (a patch may have been half applied)."""
        if step == "weight_sync":
            self.actor.reset_sync(within=(step, self.timeouts.weight_sync))

    # -- recovery ------------------------------------------------------------------------
    def repair(self) -> dict[str, list[int]]:
        """Respawn dead workers; a dead trainer rank rebuilds the whole trainer group."""
        rebuilt: dict[str, list[int]] = {}
        for group in self.groups:
            dead = group.dead_ranks()
            if not dead:
                continue
            ranks = list(range(len(group))) if group is self.actor else dead
            for rank in ranks:
                group.respawn(rank)
            if getattr(group.cls, "stateless", False):  # nothing lost: retry, no rewind
                logger.warning("respawned %s workers %s (they hold no state)", group.name, ranks)
                continue
            rebuilt[group.name] = ranks
        for group in self.groups:
            group.wait_started(self.timeouts.worker_start)
        if "actor" in rebuilt:
            self._setup_trainer()
        return rebuilt
