"""The sections of a reasoning run (language models on prompt sets).

Each extends its shared section (:mod:`rl_core.config.training_sections` and friends) with
the fields only the reasoning kind reads; :class:`rl_core.config.reasoning.ReasoningConfig`
assembles them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from kinds.reasoning.model_reward_section import ModelRewardConfig
from rl_core.config.limits import (
    MAX_EPOCHS,
    MAX_GROUP_SIZE,
    MAX_ITERATIONS,
    MAX_MINIBATCHES,
    MAX_SAMPLE_ROWS,
    MAX_TOKENS,
    MAX_WORKERS,
)
from rl_core.config.llm_sections import (
    FSDPConfig,
    HuggingFaceModelConfig,
    LoraConfig,
    MegatronConfig,
    VLLMConfig,
)
from rl_core.config.run_sections import EvalConfig
from rl_core.config.sections import (
    check_regex,
    check_registered,
    check_registered_name,
    field_error,
)
from rl_core.config.training_sections import (
    ActorConfig,
    AlgorithmConfig,
    RewardConfig,
    RolloutConfig,
)


class ReasoningModelConfig(HuggingFaceModelConfig):
    """The language model of a reasoning run (``hf_causal_lm``)."""

    value_head: bool = Field(
        False, description="hf_causal_lm: add a critic head (PPO with adv_type token_gae)."
    )


class ReasoningRolloutConfig(RolloutConfig):
    """Generation engine, sampling and weight sync of a reasoning run."""

    engine: str = Field(
        "hf", description="Reasoning: generation engine (Hugging Face generate, or vLLM)."
    )
    vllm: VLLMConfig = Field(default_factory=lambda: VLLMConfig())
    max_new_tokens: int = Field(
        16, ge=1, le=MAX_TOKENS, description="Reasoning: longest response (tokens)."
    )
    partial_rollout_tokens: int = Field(
        0,
        ge=0,
        le=MAX_TOKENS,
        description="Reasoning, run.mode async: tokens a generation advances per weight "
        "version; one still unfinished then continues under the next version (partial "
        "rollouts; 0 = off: a batch is generated whole with the version it was launched with).",
    )
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, le=MAX_TOKENS, description="0 = no top-k truncation.")
    weight_sync_mode: Literal["bucket", "patch"] = Field(
        "bucket",
        description="bucket: the full state dict in size-capped buckets; patch: only the "
        "elements changed since the last sync, with a periodic full sync.",
    )
    weight_sync_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="Cast floating weights for the transfer (None: keep their dtype)."
    )
    patch_full_sync_interval: int = Field(
        10,
        ge=1,
        le=MAX_ITERATIONS,
        description="patch mode: a full sync every this many syncs.",
    )
    sync_probe: bool = Field(
        True,
        description="After every weight sync, compare the rollout engines' log-probs of a "
        "fixed probe text with the trainer's; a difference above sync_probe_atol fails the "
        "iteration (the engine is not sampling from the trained weights).",
    )
    sync_probe_atol: float | None = Field(
        None,
        gt=0.0,
        description="Largest allowed log-prob difference of the probe (None: 1e-3 when the "
        "model computes in float32 with the hf engine and weights travel uncast, else 0.1).",
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return check_registered_name("rollout_engine", value)


class ReasoningAlgorithmConfig(AlgorithmConfig):
    """Group sampling, loss aggregation, DAPO and off-policy corrections of a reasoning run."""

    kl_in_reward: bool = Field(
        False, description="Apply the KL as a per-token reward penalty instead of a loss term."
    )
    group_size: int = Field(
        8, ge=1, le=MAX_GROUP_SIZE, description="Reasoning: responses sampled per prompt."
    )
    loss_agg_mode: str = Field(
        "token-mean", description="Reasoning: how per-token losses reduce to one."
    )
    loss_agg_norm: float | None = Field(
        None, gt=0.0, description="Constant of seq-mean-token-sum-norm (None: max_new_tokens)."
    )
    dynamic_sampling: bool = Field(
        False,
        description="DAPO: drop groups whose responses all got the same reward and sample more.",
    )
    max_num_gen_batches: int = Field(
        4,
        ge=1,
        le=MAX_EPOCHS,
        description="DAPO: most generation rounds per iteration to fill the batch.",
    )
    overlong_buffer_length: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="DAPO soft overlong punishment zone (tokens); None = off.",
    )
    overlong_penalty_factor: float = Field(1.0, ge=0.0)
    is_correction: str = Field(
        "none",
        description="Reasoning: importance-sampling correction of the rollout engine's "
        "samples towards the trainer's policy (none, tis: truncate ratios at is_threshold, "
        "mis: drop tokens or sequences whose ratio leaves [is_threshold_low, is_threshold]).",
    )
    is_level: Literal["token", "sequence"] = Field(
        "token", description="Ratio per token, or per sequence (the product over its tokens)."
    )
    is_threshold: float = Field(2.0, gt=1.0, description="Upper bound of the IS ratio.")
    is_threshold_low: float | None = Field(
        None, gt=0.0, le=1.0, description="mis: lower bound of the ratio (None: 1/is_threshold)."
    )

    @field_validator("loss_agg_mode")
    @classmethod
    def _known_loss_agg_mode(cls, value: str) -> str:
        return check_registered_name("loss_agg_mode", value)

    @field_validator("is_correction")
    @classmethod
    def _known_correction(cls, value: str) -> str:
        return value if value == "none" else check_registered("is_correction", value)


class ReasoningActorConfig(ActorConfig):
    """The FSDP2 or megatron trainer of a reasoning run."""

    micro_batch_size: int = Field(
        8,
        ge=1,
        le=MAX_MINIBATCHES,
        description="Reasoning: sequences per forward/backward (gradient accumulation), "
        "unless max_tokens_per_micro_batch is set.",
    )
    max_tokens_per_micro_batch: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="Reasoning: fill each forward/backward with rows up to this many real "
        "tokens (prompt + response) instead of micro_batch_size rows (verl's "
        "ppo_max_token_len_per_gpu); at least data.max_prompt_length + "
        "rollout.max_new_tokens. None: by rows.",
    )
    packing: bool = Field(
        True,
        description="Reasoning: compute each micro-batch as one sequence of its rows' real "
        "tokens, without padding (attention stays within each row; the same log-probs). "
        "false: rows padded to the micro-batch's longest.",
    )
    balance_batch: bool = Field(
        True,
        description="Reasoning: give each data-parallel rank rows of about the same total "
        "length (tokens) in every minibatch (verl's balance_batch).",
    )
    sft_steps_per_iteration: int = Field(
        1,
        ge=1,
        le=MAX_EPOCHS,
        description="SFT (flows/sft.py): optimizer steps, each on a new batch, per iteration.",
    )
    backend: str = Field(
        "fsdp",
        description="Reasoning: the trainer of hf_causal_lm policies; fsdp (FSDP2, data "
        "parallel) or megatron (megatron-core, tensor x data parallel; see actor.megatron).",
    )
    fsdp_config: FSDPConfig = Field(default_factory=lambda: FSDPConfig())
    megatron: MegatronConfig = Field(default_factory=lambda: MegatronConfig())
    lora: LoraConfig = Field(default_factory=lambda: LoraConfig())

    @property
    def tensor_parallel_size(self) -> int:
        """Ranks each layer is split across (1 unless the megatron backend splits it)."""
        return self.megatron.tensor_model_parallel_size if self.backend == "megatron" else 1

    @property
    def data_parallel_size(self) -> int:
        """Model replicas the batch is split across (the trainer ranks / tensor parallel)."""
        return self.num_workers // self.tensor_parallel_size

    @property
    def update_micro_batch_size(self) -> int:
        """Sequences per forward/backward of this backend."""
        if self.backend == "megatron" and self.megatron.micro_batch_size is not None:
            return self.megatron.micro_batch_size
        return self.micro_batch_size

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return check_registered_name("trainer_backend", value)

    @model_validator(mode="after")
    def _lora_fits_backend(self) -> ReasoningActorConfig:
        if self.lora.enabled and self.backend != "fsdp":
            raise ValueError(
                f"actor.lora.rank = {self.lora.rank} with actor.backend = {self.backend!r}: "
                "LoRA adapters train with the fsdp backend only (allowed: actor.backend: fsdp, "
                "or actor.lora.rank: 0 for full fine-tuning)"
            )
        return self


class ReasoningEvalConfig(EvalConfig):
    """Greedy accuracy and pass@k on held-out prompts."""

    pass_k: int = Field(
        4, ge=1, le=MAX_GROUP_SIZE, description="Reasoning: samples per prompt for pass@k."
    )
    sample_rows: int = Field(
        16,
        ge=0,
        le=MAX_SAMPLE_ROWS,
        description="Reasoning: completions logged as an MLflow table per evaluation.",
    )
    correct_when: str = Field(
        "math_verify",
        description="Reasoning: the registered reward whose full score makes a completion "
        "correct (eval/accuracy, pass@k): math_verify compares final answers; code_tests "
        "needs every unit test passed; humaneval needs the problem's check to pass.",
    )

    @field_validator("correct_when")
    @classmethod
    def _known_reward(cls, value: str) -> str:
        return check_registered_name("reward", value)


class ReasoningRewardConfig(RewardConfig):
    """Scoring responses: rule rewards on Ray tasks, a reward model or judge on workers."""

    reward_type: str = Field(
        "data_source",
        description="Registered reward. Reasoning default data_source: each row is scored by "
        "the built-in reward its data_source column names (verl's files: openai/gsm8k, "
        "lighteval/MATH...); function: reward.function; math_verify, format, code_tests, "
        "reward_model, composite.",
    )
    function: str | None = Field(
        None,
        description="Your reward function, 'path/to/file.py:name' or 'package.module:name', "
        "with verl's signature compute_score(data_source, solution_str, ground_truth, "
        "extra_info=None) or TRL's reward_func(prompts, completions, **kwargs); used by "
        "reward_type function (or a 'function' component of composite).",
    )

    num_tasks: int = Field(
        2,
        ge=1,
        le=MAX_WORKERS,
        description="Reasoning: parallel Ray tasks the scoring of a batch fans out to.",
    )
    fanout_min_seconds: float = Field(
        0.5,
        ge=0.0,
        description="Reasoning: the reward task scores a batch itself until scoring takes at "
        "least this long, then the run fans scoring out to num_tasks Ray tasks (each fan-out "
        "costs about 0.4 s of task overhead on 2 CPUs; 0 always fans out).",
    )
    sandbox: str = Field(
        "subprocess",
        description="code_tests, humaneval: the registered sandbox that runs completions' code.",
    )
    sandbox_retries: int = Field(
        2,
        ge=0,
        le=100,
        description="code_tests, humaneval: retries of a sandbox run that failed through the machinery; "
        "a row still failing is not scored (left out of training, never a silent 0).",
    )
    code_wall_seconds: float = Field(
        5.0,
        gt=0.0,
        le=3600.0,
        description="code_tests, humaneval: wall-clock limit of one test program.",
    )
    code_workers: int = Field(
        4,
        ge=1,
        le=MAX_WORKERS,
        description="code_tests, humaneval: test programs run at once per task.",
    )
    format_pattern: Annotated[str, AfterValidator(check_regex)] = Field(
        r"\\boxed\{.+?\}|####\s*\S+",
        description=(
            "format: regex (searched with re.DOTALL) a completion must contain; the default "
            "matches a boxed or #### answer."
        ),
    )

    model: ModelRewardConfig | None = Field(
        None,
        description="The reward model or LLM judge scoring the reward 'reward_model' "
        "(reward_type: reward_model, or a component of composite); docs/reward-models.md.",
    )

    @field_validator("sandbox")
    @classmethod
    def _known_sandbox(cls, value: str) -> str:
        return check_registered_name("sandbox", value)

    @model_validator(mode="after")
    def _function_used_and_loadable(self) -> ReasoningRewardConfig:
        from rl_core.rewards.user_function import load_reward_function

        names = {self.reward_type.lower(), *(n.lower() for n in self.components)}
        if "function" in names and not self.function:
            raise field_error(
                "ReasoningRewardConfig",
                ("function",),
                self.function,
                "the reward 'function' needs reward.function ('path/to/file.py:name' or "
                "'package.module:name')",
            )
        if self.function and "function" not in names:
            raise field_error(
                "ReasoningRewardConfig",
                ("function",),
                self.function,
                f"reward.function is set but reward_type {self.reward_type!r} does not use it: "
                "set reward.reward_type=function, or add function to reward.components",
            )
        if self.function:
            try:
                load_reward_function(self.function)
            except ValueError as exc:
                raise field_error(
                    "ReasoningRewardConfig", ("function",), self.function, str(exc)
                ) from None
        return self

    @model_validator(mode="after")
    def _model_reward_configured(self) -> ReasoningRewardConfig:
        from rl_core.rewards.model_reward import MODEL_REWARD, reward_plan

        uses = reward_plan(self).uses_model
        if uses and self.model is None:
            raise ValueError(
                f"reward {MODEL_REWARD!r} needs reward.model (kind, and uri or preset: the "
                "reward model or judge that scores responses)"
            )
        return self
