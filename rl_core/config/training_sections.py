"""The ``rollout``, ``algorithm``, ``actor`` and ``reward`` sections of the config schema.

Assembled with the other sections by :mod:`rl_core.config.schema`, which also holds the
rules that relate fields of several sections.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from rl_core.config.limits import (
    MAX_BUCKET_MB,
    MAX_ENVS,
    MAX_EPOCHS,
    MAX_GROUP_SIZE,
    MAX_ITERATIONS,
    MAX_MINIBATCHES,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_WORKERS,
)
from rl_core.config.llm_sections import FSDPConfig, MegatronConfig, VLLMConfig
from rl_core.config.off_policy_sections import OffPolicyConfig
from rl_core.config.sections import (
    Section,
    check_regex,
    check_registered,
    check_reward_components,
)


class RolloutConfig(Section):
    """Policy inference workers and weight sync."""

    num_workers: int = Field(1, ge=1, le=MAX_WORKERS)
    num_steps: int = Field(128, ge=1, le=MAX_STEPS, description="Env steps per env per iteration.")
    weight_sync_bucket_mb: float = Field(
        64.0, gt=0, le=MAX_BUCKET_MB, description="Max size of one weight-sync bucket."
    )
    pipeline_stages: int = Field(
        1,
        ge=1,
        le=MAX_ENVS,
        description="Env slices with requests in flight at once (hides the Ray round trip); "
        "must divide env.num_envs.",
    )
    engine: Literal["hf", "vllm"] = Field(
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


class AlgorithmConfig(Section):
    """Advantage estimator and policy loss with their coefficients."""

    adv_type: str = "gae"
    loss_type: str = Field(
        "ppo",
        description="Registered policy loss (ppo, decoupled_ppo...) or off-policy algorithm "
        "(sac, crossq, rlpd: trained from a replay buffer).",
    )
    gamma: float = Field(0.99, ge=0.0, le=1.0)
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0)
    normalize_advantages: bool = True
    clip_ratio_low: float = Field(0.2, gt=0.0, lt=1.0)
    clip_ratio_high: float = Field(0.2, gt=0.0)
    clip_ratio_c: float | None = Field(None, gt=1.0, description="Dual-clip bound (> 1) or None.")
    value_clip: float | None = Field(0.2, gt=0.0)
    value_coef: float = Field(0.5, ge=0.0)
    entropy_coef: float = Field(0.0, ge=0.0)
    kl_estimator: Literal["k1", "k2", "k3", "low_var_kl", "k1+", "k2+", "k3+", "low_var_kl+"] = "k3"
    kl_coef: float = Field(
        0.0, ge=0.0, description="Reasoning: weight of the KL to the reference model (0 = off)."
    )
    kl_in_reward: bool = Field(
        False, description="Apply the KL as a per-token reward penalty instead of a loss term."
    )
    group_size: int = Field(
        8, ge=1, le=MAX_GROUP_SIZE, description="Reasoning: responses sampled per prompt."
    )
    loss_agg_mode: Literal[
        "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
    ] = Field("token-mean", description="Reasoning: how per-token losses reduce to one.")
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
    target_kl: float | None = Field(
        None, gt=0.0, description="Stop an update's epochs early above this KL."
    )
    max_staleness: int = Field(
        1,
        ge=0,
        le=MAX_EPOCHS,
        description="run.mode async: most weight versions the policy that collected a batch "
        "may lag the trainer (0 reproduces sync mode).",
    )
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
    behaviour_weight_cap: float = Field(
        5.0,
        gt=1.0,
        description="decoupled_ppo: largest weight pi_proximal / pi_behaviour of a token or env step.",
    )

    @field_validator("adv_type")
    @classmethod
    def _known_adv(cls, value: str) -> str:
        return check_registered("advantage", value)

    off_policy: OffPolicyConfig = Field(default_factory=lambda: OffPolicyConfig())

    @field_validator("loss_type")
    @classmethod
    def _known_loss(cls, value: str) -> str:
        from rl_core.algorithms.actor_critic_family import ACTOR_CRITIC_ALGORITHMS

        if value in ACTOR_CRITIC_ALGORITHMS:
            return value
        try:
            return check_registered("policy_loss", value)
        except ValueError as exc:
            names = ", ".join(ACTOR_CRITIC_ALGORITHMS.names())
            raise ValueError(f"{exc} Off-policy algorithms: {names}.") from None

    @field_validator("is_correction")
    @classmethod
    def _known_correction(cls, value: str) -> str:
        return value if value == "none" else check_registered("is_correction", value)


class ActorConfig(Section):
    """Trainer workers: optimizer, schedule and batching."""

    num_workers: int = Field(
        1,
        ge=1,
        le=MAX_WORKERS,
        description="Trainer workers. The embodied MLP trainer is single-process; reasoning "
        "models train data-parallel with FSDP2 across this many workers.",
    )
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    lr: float = Field(3e-4, gt=0.0)
    adam_eps: float | None = Field(None, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_iterations: int = Field(0, ge=0, le=MAX_ITERATIONS)
    update_epochs: int = Field(4, ge=1, le=MAX_EPOCHS)
    num_minibatches: int = Field(4, ge=1, le=MAX_MINIBATCHES)
    max_grad_norm: float | None = Field(0.5, gt=0.0)
    max_skipped_updates_in_a_row: int = Field(
        3,
        ge=1,
        le=MAX_STEPS,
        description="Optimizer updates whose loss or gradient norm is not finite are skipped "
        "(train/skipped_updates); this many skipped in a row stop the run.",
    )
    micro_batch_size: int = Field(
        8,
        ge=1,
        le=MAX_MINIBATCHES,
        description="Reasoning: sequences per forward/backward (gradient accumulation).",
    )
    sft_steps_per_iteration: int = Field(
        1,
        ge=1,
        le=MAX_EPOCHS,
        description="SFT (flows/sft.py): optimizer steps, each on a new batch, per iteration.",
    )
    backend: Literal["fsdp", "megatron"] = Field(
        "fsdp",
        description="Reasoning: the trainer of hf_causal_lm policies; fsdp (FSDP2, data "
        "parallel) or megatron (megatron-core, tensor x data parallel; see actor.megatron).",
    )
    fsdp_config: FSDPConfig = Field(default_factory=lambda: FSDPConfig())
    megatron: MegatronConfig = Field(default_factory=lambda: MegatronConfig())

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


class RewardConfig(Section):
    """Reward function applied to collected rollouts."""

    reward_type: str = Field("env", description="Registered reward; 'env' uses the env's reward.")
    scale: float = 1.0
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
    # Annotated validators (not @field_validator) keep scripts/gen_config_docs.py's table of
    # field validators unchanged; the descriptions state what they check.
    components: Annotated[dict[str, float], AfterValidator(check_reward_components)] = Field(
        default_factory=dict,
        description=(
            "composite: reward name -> weight (registered rewards other than 'composite', "
            "finite weights)."
        ),
    )
    format_pattern: Annotated[str, AfterValidator(check_regex)] = Field(
        r"\\boxed\{.+?\}|####\s*\S+",
        description=(
            "format: regex (searched with re.DOTALL) a completion must contain; the default "
            "matches a boxed or #### answer."
        ),
    )

    @field_validator("reward_type")
    @classmethod
    def _known_reward(cls, value: str) -> str:
        return check_registered("reward", value)
