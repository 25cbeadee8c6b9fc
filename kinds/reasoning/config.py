"""The configuration class of the reasoning kind."""

from __future__ import annotations

from pydantic import Field, model_validator

from kinds.reasoning.agent_section import AgentConfig
from kinds.reasoning.model_reward_section import ModelRewardConfig
from kinds.reasoning.sections import (
    ReasoningActorConfig,
    ReasoningAlgorithmConfig,
    ReasoningEvalConfig,
    ReasoningModelConfig,
    ReasoningRewardConfig,
    ReasoningRolloutConfig,
)
from rl_core.config import limits
from rl_core.config.llm_sections import DataConfig, LoraConfig
from rl_core.config.megatron_checks import megatron_problems
from rl_core.config.schema import RLPipeConfig
from rl_core.llm.implementations import LORA_ROLLOUT_ENGINES
from rl_core.models.model_path import local_model_problem


class ReasoningConfig(RLPipeConfig):
    """The configuration of a reasoning run."""

    kind_name = "reasoning"
    supports_async = True

    data: DataConfig = Field(default_factory=DataConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    model: ReasoningModelConfig = Field(default_factory=ReasoningModelConfig)
    rollout: ReasoningRolloutConfig = Field(default_factory=ReasoningRolloutConfig)
    algorithm: ReasoningAlgorithmConfig = Field(default_factory=ReasoningAlgorithmConfig)
    actor: ReasoningActorConfig = Field(default_factory=ReasoningActorConfig)
    reward: ReasoningRewardConfig = Field(default_factory=ReasoningRewardConfig)
    eval: ReasoningEvalConfig = Field(default_factory=ReasoningEvalConfig)

    def lora_adapters(self) -> LoraConfig | None:
        """The ``actor.lora`` section when LoRA adapters train (``actor.lora.rank`` > 0)."""
        return self.actor.lora if self.actor.lora.enabled else None

    def reward_model_section(self) -> ModelRewardConfig | None:
        """The ``reward.model`` section when a model scores the rewards."""
        return self.reward.model

    def scoring_fanout_min_seconds(self) -> float | None:
        """``reward.fanout_min_seconds``."""
        return self.reward.fanout_min_seconds

    def pretrained_model(self) -> ReasoningModelConfig:
        """The ``model`` section: a Hugging Face model."""
        return self.model

    @model_validator(mode="after")
    def _advantage_fits_model(self) -> ReasoningConfig:
        adv = self.algorithm.adv_type.lower()
        if adv in ("gae", "episode_grpo"):
            raise ValueError(
                f"algorithm.adv_type = {adv!r} is an estimator of env episodes; reasoning models "
                "use 'token_gae' (with model.value_head: true), 'grpo', 'dr_grpo', 'rloo', "
                "'reinforce_plus_plus' or 'reinforce_plus_plus_baseline'"
            )
        if adv == "token_gae" and not self.model.value_head:
            raise ValueError("algorithm.adv_type = 'token_gae' needs model.value_head: true")
        if self.reward.reward_type.lower() == "env":
            raise ValueError(
                "reward.reward_type = 'env' is the embodied env reward; reasoning runs score "
                "responses with e.g. 'math_verify', 'format' or 'composite'"
            )
        return self

    @model_validator(mode="after")
    def _agent_loop_fits(self) -> ReasoningConfig:
        if self.agent.multi_turn and self.rollout.partial_rollout_tokens:
            raise ValueError(
                f"rollout.partial_rollout_tokens = {self.rollout.partial_rollout_tokens}: "
                f"partial rollouts continue single responses; agent.loop = "
                f"{self.agent.loop!r} makes multi-turn trajectories (allowed: 0 with it)"
            )
        if self.agent.context != "append":
            # one row per model turn: advantages come from the trajectories' outcomes
            if self.model.value_head or self.algorithm.adv_type.lower() == "token_gae":
                raise ValueError(
                    f"agent.context = {self.agent.context!r} trains one sample per model turn "
                    "with its trajectory's advantage, which a critic cannot give (allowed "
                    "with model.value_head / token_gae: 'append')"
                )
            if self.algorithm.kl_in_reward and self.algorithm.kl_coef > 0:
                raise ValueError(
                    f"agent.context = {self.agent.context!r} with algorithm.kl_in_reward = "
                    "true: the KL of each turn is measured on its own input, not the "
                    "trajectory's (allowed: kl_in_reward false, the KL as a loss term)"
                )
        return self

    @model_validator(mode="after")
    def _model_files_exist(self) -> ReasoningConfig:
        if self.model.model_type.lower() != "hf_causal_lm" or self.run.warm_start:
            return self  # a warm-start run provides the model
        path = self.model.model_path
        if not path:
            raise ValueError("model.model_path is required for model_type hf_causal_lm")
        if self.model.tiny_init:
            return self  # created before any worker starts
        problem = local_model_problem(path)  # a hub id is found in the cache before workers
        if problem:
            raise ValueError(
                f"{problem}; build the tiny test model with 'python scripts/build_tiny_lm.py <dir>'"
            )
        return self

    @model_validator(mode="after")
    def _async_generation_fits(self) -> ReasoningConfig:
        if self.rollout.partial_rollout_tokens and (
            self.run.mode != "async" or self.algorithm.max_staleness == 0
        ):
            raise ValueError(
                f"rollout.partial_rollout_tokens = {self.rollout.partial_rollout_tokens} "
                "continues generations across weight updates, which needs run.mode = 'async' "
                "with algorithm.max_staleness >= 1 (allowed otherwise: 0)"
            )
        if self.run.mode == "async" and self.algorithm.dynamic_sampling:
            raise ValueError(
                "algorithm.dynamic_sampling = true scores responses inside the rollout step, "
                "which run.mode = 'async' generates ahead of it (allowed with async: false)"
            )
        return self

    @model_validator(mode="after")
    def _off_policy_correction_fits(self) -> ReasoningConfig:
        algo = self.algorithm
        if algo.loss_type.lower() == "decoupled_ppo" and algo.is_correction != "none":
            raise ValueError(
                f"algorithm.is_correction = {algo.is_correction!r} with loss_type "
                "'decoupled_ppo' would correct the same ratio twice (decoupled_ppo already "
                "weights by pi_proximal / pi_behaviour); set is_correction: none"
            )
        return self

    @model_validator(mode="after")
    def _megatron_layout_fits(self) -> ReasoningConfig:
        problems = megatron_problems(self) if self.actor.backend == "megatron" else []
        if problems:
            raise ValueError("actor.backend = 'megatron': " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _engine_applies_lora(self) -> ReasoningConfig:
        engine = self.rollout.engine
        if self.actor.lora.enabled and engine not in LORA_ROLLOUT_ENGINES:
            raise ValueError(
                f"actor.lora.rank = {self.actor.lora.rank} with rollout.engine = {engine!r}: "
                "that engine cannot apply LoRA adapters (allowed: "
                f"{', '.join(LORA_ROLLOUT_ENGINES.names())}, or actor.lora.rank: 0)"
            )
        return self

    @model_validator(mode="after")
    def _batch_divides(self) -> ReasoningConfig:
        batch = self.data.prompts_per_batch * self.algorithm.group_size
        parts = self.actor.num_minibatches * self.actor.data_parallel_size
        if batch % parts:
            what = (
                "actor.num_workers"
                if self.actor.tensor_parallel_size == 1
                else "(actor.num_workers/actor.megatron.tensor_model_parallel_size)"
            )
            raise ValueError(
                f"the batch of {batch} responses (data.prompts_per_batch*algorithm."
                f"group_size) must divide into actor.num_minibatches*{what} = "
                f"{parts} equal parts"
            )
        return self

    @model_validator(mode="after")
    def _token_budget_fits_a_row(self) -> ReasoningConfig:
        budget = self.actor.max_tokens_per_micro_batch
        longest = self.data.max_prompt_length + self.rollout.max_new_tokens
        if budget is not None and budget < longest:
            raise ValueError(
                f"actor.max_tokens_per_micro_batch = {budget} cannot hold the longest row, "
                f"data.max_prompt_length + rollout.max_new_tokens = "
                f"{self.data.max_prompt_length} + {self.rollout.max_new_tokens} = {longest} "
                f"tokens (allowed: at least {longest}, or null for micro-batches by rows)"
            )
        return self

    @model_validator(mode="after")
    def _rollout_buffer_fits_memory(self) -> ReasoningConfig:
        estimate = limits.reasoning_buffer(
            self.data.prompts_per_batch,
            self.algorithm.group_size,
            self.data.max_prompt_length,
            self.rollout.max_new_tokens,
        )
        memory = limits.machine_memory_bytes()
        if memory is not None and estimate.bytes > memory:
            raise ValueError(estimate.describe(memory))
        return self
