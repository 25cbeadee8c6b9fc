"""The one configuration schema: every default lives here, presets only override.

Defaults live in this module and the section modules it assembles (``run_sections``,
``policy_sections``, ``training_sections``, ``llm_sections``). Sections follow RLinf's
layout (``run``, ``cluster``, ``env``, ``model``, ``rollout``, ``algorithm``, ``actor``,
``reward``, ``eval``, ``tracking``) plus ``timeouts``. Unknown keys are rejected, and names of
pluggable parts (env/model/advantage/loss/reward types) are checked against their
registries so a typo fails before any worker starts. Floats must be finite, counts and
sizes have upper bounds (:mod:`rl_core.config.limits`) and the rollout batch must fit in
memory.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from rl_core.config import limits
from rl_core.config.cluster_section import ClusterConfig
from rl_core.config.hybrid import hybrid_engine_blockers
from rl_core.config.llm_sections import DataConfig
from rl_core.config.megatron_checks import megatron_problems
from rl_core.config.off_policy_sections import ReplayConfig, off_policy_problems
from rl_core.config.policy_sections import EnvConfig, ModelConfig
from rl_core.config.run_sections import (
    EvalConfig,
    RunConfig,
    TimeoutsConfig,
    TrackingConfig,
)
from rl_core.config.sections import Section
from rl_core.config.training_sections import (
    ActorConfig,
    AlgorithmConfig,
    RewardConfig,
    RolloutConfig,
)

__all__ = [
    "ActorConfig",
    "AlgorithmConfig",
    "ModelConfig",
    "RLPipeConfig",
    "RewardConfig",
    "RolloutConfig",
]

#: Estimators that score whole episodes/sequences (not usable by the per-step PPO trainer).
_OUTCOME_ESTIMATORS = {
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "token_gae",
}


class RLPipeConfig(Section):
    """The complete, validated configuration of a run."""

    preset: str = Field("custom", description="Name of the preset this config came from.")
    run: RunConfig = Field(default_factory=RunConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    actor: ActorConfig = Field(default_factory=ActorConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)

    @property
    def category(self) -> str:
        """``embodied`` or ``reasoning``: the registered category of the model type."""
        from rl_core.registries import registry_for

        return registry_for("model").get(self.model.model_type).category

    @model_validator(mode="after")
    def _advantage_fits_model(self) -> RLPipeConfig:
        adv = self.algorithm.adv_type.lower()
        if self.category == "embodied":
            if adv in _OUTCOME_ESTIMATORS:
                raise ValueError(
                    f"algorithm.adv_type = {adv!r} scores whole episodes/sequences per group; the "
                    "embodied PPO trainer collects per-step rewards and needs a per-step "
                    "estimator such as 'gae'"
                )
            if self.actor.num_workers > 1:
                raise ValueError(
                    f"actor.num_workers = {self.actor.num_workers}: the embodied MLP trainer is "
                    "single-process (data-parallel FSDP2 trainers are for reasoning models)"
                )
        elif self.category == "reasoning":
            if adv == "gae":
                raise ValueError(
                    "algorithm.adv_type = 'gae' is the per-env-step estimator; reasoning models "
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
    def _model_files_exist(self) -> RLPipeConfig:
        if self.model.model_type.lower() != "hf_causal_lm":
            return self
        from pathlib import Path

        if self.run.warm_start:
            return self  # the warm-start run provides the model
        path = self.model.model_path
        if not path:
            raise ValueError("model.model_path is required for model_type hf_causal_lm")
        if self.model.tiny_init:
            return self  # created before any worker starts
        if not (Path(path) / "config.json").is_file():
            raise ValueError(
                f"model.model_path = {path!r} is not a local Hugging Face model directory (no "
                "config.json); build the tiny test model with "
                "'python scripts/build_tiny_lm.py <dir>'"
            )
        return self

    @model_validator(mode="after")
    def _async_mode_fits(self) -> RLPipeConfig:
        if self.rollout.partial_rollout_tokens and (
            self.run.mode != "async" or self.algorithm.max_staleness == 0
        ):
            raise ValueError(
                f"rollout.partial_rollout_tokens = {self.rollout.partial_rollout_tokens} "
                "continues generations across weight updates, which needs run.mode = 'async' "
                "with algorithm.max_staleness >= 1 (allowed otherwise: 0)"
            )
        if self.run.mode != "async":
            return self
        if self.category not in ("embodied", "reasoning"):
            raise ValueError(
                f"run.mode = 'async' runs embodied and reasoning models; this run's model "
                f"({self.model.model_type}) is {self.category} (allowed: 'sync')"
            )
        if self.category == "reasoning" and self.algorithm.dynamic_sampling:
            raise ValueError(
                "algorithm.dynamic_sampling = true scores responses inside the rollout step, "
                "which run.mode = 'async' generates ahead of it (allowed with async: false)"
            )
        return self

    @model_validator(mode="after")
    def _off_policy_correction_fits(self) -> RLPipeConfig:
        algo = self.algorithm
        decoupled = algo.loss_type.lower() == "decoupled_ppo"
        if decoupled and algo.is_correction != "none":
            raise ValueError(
                f"algorithm.is_correction = {algo.is_correction!r} with loss_type "
                "'decoupled_ppo' would correct the same ratio twice (decoupled_ppo already "
                "weights by pi_proximal / pi_behaviour); set is_correction: none"
            )
        return self

    @model_validator(mode="after")
    def _off_policy_fits(self) -> RLPipeConfig:
        from rl_core.algorithms.actor_critic_family import actor_critic_spec

        spec = actor_critic_spec(self.algorithm.loss_type)
        if spec is None:
            if self.model.model_type.lower() == "mlp_sac":
                raise ValueError(
                    f"model.model_type = 'mlp_sac' is trained by an off-policy algorithm; "
                    f"algorithm.loss_type = {self.algorithm.loss_type!r} (allowed: sac, "
                    "crossq, rlpd)"
                )
            return self
        problems = off_policy_problems(self, spec)
        if problems:
            raise ValueError(
                f"algorithm.loss_type = {self.algorithm.loss_type!r}: " + "; ".join(problems)
            )
        return self

    @model_validator(mode="after")
    def _megatron_layout_fits(self) -> RLPipeConfig:
        problems = megatron_problems(self) if self.actor.backend == "megatron" else []
        if problems:
            raise ValueError("actor.backend = 'megatron': " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _hybrid_engine_possible(self) -> RLPipeConfig:
        blockers = hybrid_engine_blockers(self) if self.cluster.hybrid_engine == "on" else []
        if blockers:
            raise ValueError(
                "cluster.hybrid_engine = 'on' is not possible: " + "; ".join(blockers) + " "
                "(allowed: 'auto' or 'off' for this placement)"
            )
        return self

    @model_validator(mode="after")
    def _stages_divide(self) -> RLPipeConfig:
        stages, envs = self.rollout.pipeline_stages, self.env.num_envs
        if envs % stages or (envs // stages) % self.env.group_size:
            raise ValueError(
                f"rollout.pipeline_stages ({stages}) must divide env.num_envs ({envs}) into "
                f"slices that are multiples of env.group_size ({self.env.group_size})"
            )
        return self

    @model_validator(mode="after")
    def _batch_divides(self) -> RLPipeConfig:
        if self.category == "reasoning":
            batch = self.data.prompts_per_batch * self.algorithm.group_size
            replicas = self.actor.data_parallel_size
            parts = self.actor.num_minibatches * replicas
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
        from rl_core.algorithms.actor_critic_family import actor_critic_spec

        if actor_critic_spec(self.algorithm.loss_type) is not None:
            return self  # minibatches are drawn from the replay buffer (replay.batch_size)
        batch = self.env.num_workers * self.env.num_envs * self.rollout.num_steps
        if batch % (self.actor.num_minibatches * self.actor.num_workers):
            raise ValueError(
                f"the batch of {batch} samples (env.num_workers*env.num_envs*rollout.num_steps) must "
                f"divide into actor.num_minibatches*actor.num_workers = "
                f"{self.actor.num_minibatches * self.actor.num_workers} equal minibatches"
            )
        return self

    @model_validator(mode="after")
    def _rollout_buffer_fits_memory(self) -> RLPipeConfig:
        if self.category == "reasoning":
            data = self.data
            estimate = limits.reasoning_buffer(
                data.prompts_per_batch,
                self.algorithm.group_size,
                data.max_prompt_length,
                self.rollout.max_new_tokens,
            )
        else:
            estimate = limits.embodied_buffer(
                self.env.num_workers, self.env.num_envs, self.rollout.num_steps
            )
        memory = limits.machine_memory_bytes()
        if memory is not None and estimate.bytes > memory:
            raise ValueError(estimate.describe(memory))
        return self
