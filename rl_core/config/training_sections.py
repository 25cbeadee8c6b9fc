"""The ``rollout``, ``algorithm``, ``actor`` and ``reward`` sections of the config schema.

Assembled with the other sections by :mod:`rl_core.config.schema`, which also holds the
rules that relate fields of several sections.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from rl_core.config.limits import (
    MAX_BUCKET_MB,
    MAX_EPOCHS,
    MAX_ITERATIONS,
    MAX_MINIBATCHES,
    MAX_STEPS,
    MAX_WORKERS,
)
from rl_core.config.sections import (
    Section,
    check_registered,
    check_registered_name,
    check_reward_components,
)


class RolloutConfig(Section):
    """Policy inference workers and weight sync."""

    num_workers: int = Field(1, ge=1, le=MAX_WORKERS)
    weight_sync_bucket_mb: float = Field(
        64.0, gt=0, le=MAX_BUCKET_MB, description="Max size of one weight-sync bucket."
    )


class AlgorithmConfig(Section):
    """Advantage estimator and policy loss with their coefficients."""

    adv_type: str = "gae"
    loss_type: str = Field(
        "ppo",
        description="Registered policy loss (ppo, decoupled_ppo...) or off-policy algorithm "
        "(sac, crossq, rlpd: trained from a replay buffer; iql: offline, from the "
        "demonstration dataset).",
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
    kl_estimator: str = "k3"
    kl_coef: float = Field(
        0.0, ge=0.0, description="Reasoning: weight of the KL to the reference model (0 = off)."
    )
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

    behaviour_weight_cap: float = Field(
        5.0,
        gt=1.0,
        description="decoupled_ppo: largest weight pi_proximal / pi_behaviour of a token or env step.",
    )

    @field_validator("adv_type")
    @classmethod
    def _known_adv(cls, value: str) -> str:
        return check_registered("advantage", value)

    @field_validator("kl_estimator")
    @classmethod
    def _known_kl_estimator(cls, value: str) -> str:
        return check_registered_name("kl_estimator", value)

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


class ActorConfig(Section):
    """Trainer workers: optimizer, schedule and batching."""

    num_workers: int = Field(
        1,
        ge=1,
        le=MAX_WORKERS,
        description="Trainer workers. The embodied MLP trainer is single-process; reasoning "
        "models train data-parallel with FSDP2 across this many workers.",
    )
    optimizer: str = "adam"
    lr: float = Field(3e-4, gt=0.0)
    adam_eps: float | None = Field(None, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    lr_schedule: str = "constant"
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

    @field_validator("optimizer")
    @classmethod
    def _known_optimizer(cls, value: str) -> str:
        return check_registered_name("optimizer", value)

    @field_validator("lr_schedule")
    @classmethod
    def _known_lr_schedule(cls, value: str) -> str:
        return check_registered_name("lr_schedule", value)


class RewardConfig(Section):
    """Reward function applied to collected rollouts."""

    reward_type: str = Field("env", description="Registered reward; 'env' uses the env's reward.")
    scale: float = 1.0
    # Annotated validators (not @field_validator) keep scripts/gen_config_docs.py's table of
    # field validators unchanged; the descriptions state what they check.
    components: Annotated[dict[str, float], AfterValidator(check_reward_components)] = Field(
        default_factory=dict,
        description=(
            "composite: reward name -> weight (registered rewards other than 'composite', "
            "finite weights)."
        ),
    )

    @field_validator("reward_type")
    @classmethod
    def _known_reward(cls, value: str) -> str:
        return check_registered("reward", value)
