"""Held-out evaluation of a reasoning checkpoint in this process (no Ray workers).

:class:`CheckpointEvaluator` offers what :func:`kinds.reasoning.evaluation.evaluate_heldout`
needs from a runtime (prompts, ``generate``, ``reward_chunk``, ``sampling_params``), backed
by the checkpoint's policy and Hugging Face ``generate``. Generation seeds follow the
training runtime's (``rl_core.seeding.generation_rank_seed``, one rank here), so a run trained with one rollout
worker scores the same as its in-training evaluation.
"""

from __future__ import annotations

import time
from typing import Any

from infra.checkpoint.export import policy_from_checkpoint
from infra.checkpoint.reader import CheckpointRef
from kinds.reasoning.evaluation import evaluate_heldout
from kinds.reasoning.local_reward_scorer import LocalModelRewardScorer
from kinds.reasoning.model_reward_step import score_now
from kinds.reasoning.responses import ResponseBatch, reward_chunk, sampling_params
from rl_core.config import validate_config
from rl_core.llm import SamplingParams, hf_generate
from rl_core.llm.prompting import fit_prompts, load_task_samples
from rl_core.rewards.model_reward import reward_plan
from rl_core.seeding import generation_rank_seed


class CheckpointEvaluator:
    """The checkpoint's language model and the run's held-out prompts.

    Args:
        ref: A committed checkpoint of a reasoning run.
    """

    def __init__(self, ref: CheckpointRef) -> None:
        policy, config, _ = policy_from_checkpoint(ref)
        cfg = validate_config(config, source=f"{ref.location} config.json")
        self.prepare(cfg, policy.pretrained_model(), policy.pretrained_tokenizer())

    def prepare(self, cfg: Any, model: Any, tokenizer: Any) -> None:
        """Evaluate ``model`` (a Hugging Face causal LM) as the run of ``cfg`` evaluates.

        Args:
            cfg: The run's validated config.
            model: The model to evaluate (the checkpoint's, or one being trained).
            tokenizer: Its tokenizer.
        """
        self.cfg = cfg
        self.config_dict = cfg.model_dump(mode="json")
        self.model, self.tokenizer = model, tokenizer
        _, held = load_task_samples(self.cfg.data)
        self.eval_samples, self.eval_prompts = fit_prompts(held, self.cfg.data, self.tokenizer)
        self.reward_plan = reward_plan(self.cfg.reward)
        #: The run's reward model or judge, here in this process (None: rule rewards only).
        self.model_reward = (
            LocalModelRewardScorer(self.cfg.reward.model) if self.reward_plan.uses_model else None
        )

    def sampling_params(self, greedy: bool = False) -> dict[str, Any]:
        """Sampling fields of the run's ``rollout`` section (greedy for accuracy)."""
        return sampling_params(self.cfg.rollout, int(self.tokenizer.eos_token_id), greedy)

    def generate(
        self,
        prompts: list[list[int]],
        sampling: dict[str, Any],
        seed: int,
        step: str = "evaluate",
    ) -> tuple[dict[str, list], float]:
        """One response per prompt (as one rollout worker of rank 0 would sample it).

        ``step`` is accepted for the runtime's signature; nothing runs remotely here.
        """
        start = time.perf_counter()
        out = hf_generate(
            self.model,
            prompts,
            SamplingParams(**sampling),
            int(self.tokenizer.pad_token_id),
            generation_rank_seed(seed, 0),
        )
        result = {
            "response_ids": out.response_ids,
            "logprobs": out.logprobs,
            "finished": out.finished,
        }
        return result, time.perf_counter() - start

    def reward_chunk(self, batch: ResponseBatch, rows: list[int]) -> dict[str, list[Any]]:
        """``rows`` of ``batch`` as reward keywords (completions decoded)."""
        return reward_chunk(self.tokenizer, batch, rows)

    def score_in_process(self, batch: ResponseBatch) -> list[float]:
        """Rewards of ``batch`` by the run's reward (its model, if any, in this process)."""
        return score_now(self, batch, None)

    def evaluate(self, step: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``eval/*`` metrics (accuracy, pass@k, mean reward) and sample rows."""
        return evaluate_heldout(self, step)
