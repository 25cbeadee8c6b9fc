"""ReasoningRuntime: the worker groups of an LLM reasoning run and the steps tasks call.

The step contract of :class:`infra.driver.step_runtime.StepRuntime` for causal LMs:
prompts come from the ``data`` section, rollout workers sample ``algorithm.group_size``
responses per prompt, rewards are scored by fan-out tasks, advantages are computed here,
and trainer ranks (FSDP2 or megatron, ``actor.backend``) update the policy. Tensor-parallel
peers of a megatron trainer get the same rows (:class:`~rl_core.training.parallel_layout.
ParallelLayout`); their answers are read once.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np
import torch

from infra.checkpoint import signed_dcp
from infra.checkpoint.store import open_store, step_dir_name
from infra.cluster import ray_cluster
from infra.cluster.worker_group import WorkerGroup
from infra.driver.rollout_pipeline import PIPELINE_FILE
from infra.driver.step_runtime import (
    Evaluation,
    FanoutJob,
    StepResult,
    StepRuntime,
)
from infra.reasoning.advantage_step import advantage_step
from infra.reasoning.engines import check_rollout_engine
from infra.reasoning.evaluation import evaluate_heldout
from infra.reasoning.pipelined_generation import PipelinedGeneration
from infra.reasoning.responses import ResponseBatch, reward_chunk, sampling_params
from infra.reasoning.reward_scoring import score_chunk
from infra.reasoning.sft_steps import sft_step
from infra.reasoning.worker_groups import start_reasoning_groups
from rl_core.algorithms import consecutive_groups, overlong_penalty
from rl_core.algorithms.dapo import fill_with_informative_groups
from rl_core.config import RLPipeConfig
from rl_core.data import PromptSampler
from rl_core.llm.prompting import encode_prompts, load_task_samples
from rl_core.seeding import generation_rank_seed, generation_round_seed, update_shuffle_seed
from rl_core.training.llm_update import minibatch_totals, rank_rows
from rl_core.training.parallel_layout import ParallelLayout

logger = logging.getLogger(__name__)
STATE_FILE = "reasoning_state.json"


class ReasoningRuntime(StepRuntime):
    """Creates and drives the trainer, rollout and reference worker groups of an LLM run.

    Args:
        cfg: The validated run config (a reasoning model).
    """

    spaces = None  # no env spaces: the model builder does not need any

    def __init__(self, cfg: RLPipeConfig) -> None:
        from transformers import AutoTokenizer

        super().__init__(cfg)
        ray_cluster.connect_cluster(cfg.cluster)
        self.tokenizer = AutoTokenizer.from_pretrained(
            cfg.model.model_path,
            local_files_only=True,
            trust_remote_code=cfg.model.trust_remote_code,
        )
        train, held = load_task_samples(cfg.data)
        self.train_samples, self.eval_samples = train, held
        self.train_prompts = encode_prompts(train, cfg.data, self.tokenizer)
        self.eval_prompts = encode_prompts(held, cfg.data, self.tokenizer)
        self.sampler = PromptSampler(len(train), cfg.data.prompts_per_batch, seed=cfg.run.seed)
        self.timeouts = cfg.timeouts
        workers = start_reasoning_groups(cfg, self.config_dict)
        self.workers = workers
        self.cluster_placement = workers.placement
        self.hybrid = workers.hybrid
        self.actor, self.rollout_group, self.ref = workers.actor, workers.rollout, workers.ref
        self.layout = ParallelLayout(len(self.actor), cfg.actor.tensor_parallel_size)
        for group in self.groups:
            group.wait_started(cfg.timeouts.worker_start)
        self.cluster_placement.check_workers(self.groups)
        self._setup_trainer()
        self.batch = ResponseBatch()
        self.published_version = 0  # the weight version the rollout workers were last given
        self.generation: PipelinedGeneration | None = None
        if cfg.run.mode == "async":
            self.generation = PipelinedGeneration(self)
            logger.info(
                "async mode: batches generated up to %d weight version(s) ahead of the trainer",
                cfg.algorithm.max_staleness,
            )

    @property
    def groups(self) -> list[WorkerGroup]:
        """Every worker group of the run."""
        return self.workers.all

    def _setup_trainer(self) -> None:
        timeout = self.timeouts.worker_start
        address = self.actor.get(
            [self.actor[0].rendezvous_address.remote()], timeout, "worker_start", [0]
        )[0]
        layouts = self.actor.call_within("worker_start", timeout, "setup", address)
        logger.info("trainer: %s", layouts[0])

    # -- steps ---------------------------------------------------------------------------
    @classmethod
    def preflight(cls, cfg: RLPipeConfig) -> None:
        """The rollout engine is importable and every prompt file row is valid."""
        check_rollout_engine(cfg)
        train, held = load_task_samples(cfg.data)
        logger.info("prompt data: %d training and %d held-out prompts", len(train), len(held))

    def weight_sync(self, iteration: int) -> StepResult:
        """Trainer → rollout engines: in memory (hybrid engine) or through the object store."""
        start = time.perf_counter()
        self.faults.arm("weight_sync", iteration, self.actor[0])
        if self.hybrid:
            metas = self.actor.call_within(
                "weight_sync", self.timeouts.weight_sync, "sync_rollout_weights"
            )
            self.published_version = int(metas[0]["version"])
            return StepResult(
                time.perf_counter() - start,
                {"rollout/weight_sync_bytes": 0.0, "rollout/weight_sync_full": 1.0},
                info={
                    "version": metas[0]["version"],
                    "rollout_versions": [m["version"] for m in metas],
                },
            )
        pairs = [h.sync_payload.options(num_returns=2).remote() for h in self.actor.handles]
        meta_ref, payload = pairs[0]
        timeout = self.timeouts.weight_sync
        meta = self.actor.get([p[0] for p in pairs], timeout, "weight_sync")[0]
        versions = self.rollout_group.call_within("weight_sync", timeout, "load_weights", payload)
        self.published_version = int(meta["version"])
        return StepResult(
            time.perf_counter() - start,
            {
                "rollout/weight_sync_bytes": float(meta["nbytes"]),
                "rollout/weight_sync_full": float(meta["mode"] == "full"),
            },
            info={"version": meta["version"], "rollout_versions": versions},
        )

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
        parts = np.array_split(np.arange(len(prompts)), len(self.rollout_group))
        ranks = [rank for rank, part in enumerate(parts) if len(part)]
        refs = [
            self.rollout_group[rank].generate.remote(
                [prompts[i] for i in parts[rank]], sampling, generation_rank_seed(seed, rank)
            )
            for rank in ranks
        ]
        outs = self.rollout_group.get(refs, getattr(self.timeouts, step), step, ranks=ranks)
        merged = {
            k: [x for o in outs for x in o[k]] for k in ("response_ids", "logprobs", "finished")
        }
        return merged, max(o["seconds"] for o in outs)

    def draw_rows(self, round_index: int) -> tuple[list[int], list[int], int]:
        """The next prompts, each ``group_size`` times, their group index and generation seed."""
        consumed = self.sampler.consumed
        indices = self.sampler.next_indices()
        k = self.cfg.algorithm.group_size
        rows = [i for i in indices for _ in range(k)]
        groups = consecutive_groups(len(indices), k).tolist()
        return rows, groups, generation_round_seed(self.cfg.run.seed, consumed, round_index)

    def _sample_groups(self, round_index: int) -> ResponseBatch:
        rows, groups, seed = self.draw_rows(round_index)
        out, _ = self.generate([self.train_prompts[i] for i in rows], self.sampling_params(), seed)
        return ResponseBatch(
            samples=[self.train_samples[i] for i in rows],
            prompt_ids=[self.train_prompts[i] for i in rows],
            response_ids=out["response_ids"],
            rollout_logprobs=out["logprobs"],
            finished=out["finished"],
            group_index=groups,
        )

    def rollout(self, iteration: int) -> StepResult:
        """Sample responses for the next prompts (DAPO: keep only informative groups).

        Async mode takes the batch launched ``algorithm.max_staleness`` iterations ago and
        launches the next one (:mod:`infra.reasoning.pipelined_generation`).
        """
        start = time.perf_counter()
        self.faults.arm("rollout", iteration, self.rollout_group[0])
        metrics: dict[str, float] = {}
        rounds = 1
        if self.generation is not None:
            self.batch, metrics = self.generation.take(iteration, self.published_version)
        else:
            algo, k = self.cfg.algorithm, self.cfg.algorithm.group_size
            picks, rounds = fill_with_informative_groups(
                self._sample_groups,
                self._score_in_process,
                lambda batch: batch.group_index,
                k,
                self.cfg.data.prompts_per_batch * k,
                algo.dynamic_sampling,
                algo.max_num_gen_batches,
            )
            self.batch = ResponseBatch.joined(picks)
        seconds = time.perf_counter() - start
        lengths = [len(r) for r in self.batch.response_ids]
        metrics |= {
            "rollout/response_length_mean": float(np.mean(lengths)),
            "rollout/truncated_fraction": 1.0 - float(np.mean(self.batch.finished)),
            "rollout/tokens_per_second": sum(lengths) * rounds / max(seconds, 1e-9),
            "rollout/generation_rounds": float(rounds),
        }
        return StepResult(seconds, metrics, env_steps=len(self.batch))

    def reward_chunk(self, batch: ResponseBatch, rows: list[int]) -> dict[str, list[Any]]:
        """``rows`` of ``batch`` as reward keywords (completions decoded)."""
        return reward_chunk(self.tokenizer, batch, rows)

    def _score_in_process(self, batch: ResponseBatch) -> list[float]:
        return score_chunk(
            self.config_dict["reward"], self.reward_chunk(batch, list(range(len(batch))))
        )

    def reward_jobs(self, iteration: int) -> list[FanoutJob]:
        """Chunks of the batch for the reward fan-out tasks (``reward.num_tasks`` of them)."""
        parts = np.array_split(np.arange(len(self.batch)), self.cfg.reward.num_tasks)
        fault = self.faults.task_fault("reward", iteration)
        return [
            FanoutJob(
                "score_rewards",
                score_chunk,
                {
                    "reward_cfg": self.config_dict["reward"],
                    "chunk": self.reward_chunk(self.batch, p.tolist()),
                },
                fault if i == 0 else None,
            )
            for i, p in enumerate(parts)
            if len(p)
        ]

    def reward(self, iteration: int, results: list[list[float]] | None = None) -> StepResult:
        """Collect the fan-out tasks' scores (plus DAPO's overlong penalty)."""
        start = time.perf_counter()
        scores = np.asarray([s for part in results or [] for s in part], dtype=np.float32)
        if scores.shape != (len(self.batch),):
            raise RuntimeError(f"got {scores.shape} rewards for {len(self.batch)} responses")
        metrics = {"rollout/reward_mean": float(scores.mean())}
        algo = self.cfg.algorithm
        if algo.overlong_buffer_length:
            lengths = torch.tensor([len(r) for r in self.batch.response_ids])
            penalty = overlong_penalty(
                lengths,
                self.cfg.rollout.max_new_tokens,
                algo.overlong_buffer_length,
                algo.overlong_penalty_factor,
            ).numpy()
            scores = scores + penalty
            metrics["rollout/overlong_penalty_mean"] = float(penalty.mean())
        self.batch.scores = scores
        return StepResult(time.perf_counter() - start, metrics)

    def advantage(self, iteration: int) -> StepResult:
        """Trainer and reference log-probs, token rewards, advantages (``advantage_step``)."""
        return advantage_step(self, iteration)

    def update(self, iteration: int) -> StepResult:
        """Shuffle rows, shard them across trainer ranks, update; metrics summed over ranks."""
        start = time.perf_counter()
        self.faults.arm("update", iteration, self.actor[0])
        order = np.random.default_rng(
            update_shuffle_seed(self.cfg.run.seed, iteration)
        ).permutation(len(self.batch))
        arrays = {k: v[order] for k, v in self.batch.arrays.items()}
        rows = rank_rows(len(order), self.cfg.actor.num_minibatches, self.layout.replicas)
        shards = [{k: v[r] for k, v in arrays.items()} for r in rows]
        totals = minibatch_totals(
            [{k: torch.from_numpy(v) for k, v in s.items()} for s in shards],
            self.cfg.actor.num_minibatches,
        )
        outs = self.actor.get(
            [
                h.update.remote(s, [(t.tokens, t.seqs) for t in totals], iteration)
                for h, s in zip(self.actor.handles, self.layout.per_rank(shards), strict=True)
            ],
            self.timeouts.update,
            "update",
        )
        outs = self.layout.per_replica(outs)
        metrics = {k: float(sum(o[k] for o in outs)) for k in outs[0] if k != "seconds"}
        seconds = time.perf_counter() - start
        tokens = arrays["prompt_mask"].sum() + arrays["response_mask"].sum()
        metrics["train/tokens_per_second"] = (
            float(tokens) * self.cfg.actor.update_epochs / max(seconds, 1e-9)
        )
        return StepResult.of(seconds, metrics)

    # -- supervised warm start -------------------------------------------------------------
    def sft_step(self, iteration: int) -> StepResult:
        """Supervised steps of one SFT iteration (see :func:`infra.reasoning.sft_steps.sft_step`)."""
        return sft_step(self, iteration)

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, iteration: int, results: list[Any] | None = None) -> Evaluation:
        """Greedy accuracy and pass@k on the held-out prompts, with sample rows."""
        self.weight_sync(-1)  # the weights being evaluated (the update may follow the sync)
        self.faults.arm("evaluate", iteration, self.rollout_group[0])
        metrics, rows = evaluate_heldout(self, iteration)
        return Evaluation(metrics, rows, seconds=metrics.pop("seconds"))

    @classmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Greedy accuracy, pass@k and sample rows of the checkpoint's LM, in this process."""
        from infra.checkpoint.reader import locate_checkpoint
        from infra.reasoning.checkpoint_eval import CheckpointEvaluator

        step, trusted = checkpoint["step"], checkpoint.get("trusted", False)
        ref = locate_checkpoint(store_uri, step, trusted)
        metrics, rows = CheckpointEvaluator(ref).evaluate(step)
        metrics.pop("seconds", None)
        prompts = int(metrics["eval/prompts"])
        headline = f"accuracy {metrics['eval/accuracy']:.1%} on {prompts} held-out prompts"
        return metrics, rows, headline

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self, store_uri: str, step: int) -> dict[str, Any]:
        """Trainer shards + full weights (collective) and the prompt sampler's cursor."""
        start = time.perf_counter()
        self.faults.arm("checkpoint", step - 1, self.actor[0])
        folder = step_dir_name(step)
        timeout = self.timeouts.checkpoint
        self.actor.call_within("checkpoint", timeout, "save_checkpoint", store_uri, folder)
        store = open_store(store_uri)
        if self.generation is not None:  # batches generated ahead are part of the run's state
            data = self.generation.state_bytes(timeout)  # (may put the prompt cursor back)
            store.write_bytes(f"{folder}/{PIPELINE_FILE}", data)
        state = {"sampler": self.sampler.state_dict()}
        store.write_bytes(f"{folder}/{STATE_FILE}", json.dumps(state).encode())
        return {"seconds": time.perf_counter() - start, "dir": folder}

    def load_checkpoint(self, store_uri: str, folder: str, step: int) -> None:
        """Restore trainer shards, optimizer and data cursor; the next sync is a full one."""
        local = open_store(store_uri).local_path(f"{folder}/actor_dcp")
        if local is not None:  # refused here in one line, before any trainer rank loads
            signed_dcp.check_folder(local, self.cfg.run.trust_checkpoint)
        self.actor.call_within(
            "checkpoint", self.timeouts.checkpoint, "load_checkpoint", store_uri, folder
        )
        raw = open_store(store_uri).read_bytes(f"{folder}/{STATE_FILE}")
        self.sampler.load_state_dict(json.loads(raw)["sampler"])
        self.batch = ResponseBatch()
        if self.generation is not None:
            self.generation.load(store_uri, folder, step)

    # -- retries -------------------------------------------------------------------------
    def snapshot(self, step: str) -> None:
        """Keep what ``step`` changes: the prompt cursor, the trainer ranks' state, or both.

        A rollout moves the cursor, an update the trainer; a supervised step moves both.
        """
        if step == "rollout" and self.generation is not None:
            self.generation.snapshot()  # (it keeps the cursor before each launched batch)
        elif step in ("rollout", "sft_update"):
            self._sampler_snapshot = self.sampler.state_dict()
        if step in ("update", "sft_update"):
            self.actor.call_within(step, self.timeouts.update, "snapshot")

    def restore(self, step: str) -> None:
        """Put back the state kept by :meth:`snapshot`."""
        if step in ("rollout", "sft_update"):
            self.batch = ResponseBatch()
            if step == "rollout" and self.generation is not None:
                self.generation.restore(self.timeouts.rollout)  # puts back the prompt cursor
            else:
                self.sampler.load_state_dict(self._sampler_snapshot)
        if step in ("update", "sft_update"):
            self.actor.call_within(step, self.timeouts.update, "restore_snapshot")

    def before_retry(self, step: str) -> None:
        """A retried weight sync sends full weights (a patch may have been half applied)."""
        if step == "weight_sync":
            self.actor.call_within(step, self.timeouts.weight_sync, "reset_sync")

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
            rebuilt[group.name] = ranks
        for group in self.groups:
            group.wait_started(self.timeouts.worker_start)
        if "actor" in rebuilt:
            self._setup_trainer()
        return rebuilt
