"""The ``env`` and ``model`` sections of the config schema (:mod:`rl_core.config.schema`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rl_core.config.limits import MAX_ENVS, MAX_EVAL_STEPS, MAX_WORKERS
from rl_core.config.manipulation import ManipulationConfig
from rl_core.config.sections import Section, check_finite_tree, check_registered, field_error


class EnvConfig(Section):
    """Training environments (one vectorized env per env worker)."""

    env_type: str = Field("gym", description="Registered env factory.")
    env_id: str = Field("CartPole-v1", description="gymnasium id (for env_type=gym).")
    num_workers: int = Field(1, ge=1, le=MAX_WORKERS)
    num_envs: int = Field(8, ge=1, le=MAX_ENVS, description="Envs per env worker.")
    group_size: int = Field(
        1,
        ge=1,
        le=MAX_ENVS,
        description="Consecutive envs sharing a reset seed (GRPO-style groups).",
    )
    vectorization: Literal["sync", "async", "batched", "auto"] = Field(
        "auto",
        description="How an env worker runs its envs: `sync` (in its own process), `async` "
        "(a subprocess each), `batched` (the env type's own batched simulator in the worker: "
        "ManiSkill3's GPU backend, which needs a GPU in every env worker) or `auto` (`batched` "
        "where the env type has it, the env worker has a GPU and rollout.pipeline_stages is 1; "
        "else `sync`).",
    )
    step_latency_ms: float = Field(
        0.0,
        ge=0.0,
        le=60_000.0,
        description="Wait this long in every step of an env worker's batch of envs, like the "
        "round trip to a remote simulator or robot (measures overlap honestly on few cores).",
    )
    max_episode_steps: int | None = Field(None, ge=1, le=MAX_EVAL_STEPS)
    kwargs: Annotated[dict[str, Any], AfterValidator(check_finite_tree)] = Field(
        default_factory=dict,
        description="Extra keyword arguments for the env (numbers in it must be finite).",
    )
    manipulation: ManipulationConfig = Field(
        default_factory=ManipulationConfig,
        description="Robot manipulation simulators (`env_type: metaworld`).",
    )

    @field_validator("env_type")
    @classmethod
    def _known_env_type(cls, value: str) -> str:
        return check_registered("env", value)

    @field_validator("env_id")
    @classmethod
    def _known_gym_id(cls, value: str, info: ValidationInfo) -> str:
        # A field validator (not the model one) so the error names env.env_id.
        if str(info.data.get("env_type", "")).lower() == "gym":
            from rl_core.envs.registry import check_gym_id

            check_gym_id(value)
        return value

    @model_validator(mode="after")
    def _groups_fit(self) -> EnvConfig:
        if self.num_envs % self.group_size:
            raise ValueError(
                f"env.num_envs ({self.num_envs}) must be a multiple of env.group_size ({self.group_size})"
            )
        return self

    @model_validator(mode="after")
    def _batched_exists(self) -> EnvConfig:
        from rl_core.envs.registry import BATCHED_ENVS, has_batched_env

        if self.vectorization == "batched" and not has_batched_env(self.env_type):
            raise field_error(
                "EnvConfig",
                ("vectorization",),
                self.vectorization,
                f"env_type {self.env_type} has no batched simulator (env types that do: "
                f"{', '.join(BATCHED_ENVS.names())}); allowed: sync, async, auto",
            )
        return self

    @model_validator(mode="after")
    def _env_type_accepts_settings(self) -> EnvConfig:
        # the env type's own check (e.g. metaworld: task and camera names); its error names
        # the field inside this section
        from rl_core.envs.registry import EnvConfigError, check_env_config

        try:
            check_env_config(self)
        except EnvConfigError as exc:
            raise field_error("EnvConfig", exc.field, exc.value, exc.message) from None
        return self


class ModelConfig(BaseModel):
    """Policy model; custom models may add their own keys (extra keys are kept)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, allow_inf_nan=False)
    #: Extra keys of custom models: any value, but the numbers in it must be finite.
    __pydantic_extra__: dict[str, Annotated[Any, AfterValidator(check_finite_tree)]] = Field(
        init=False
    )

    model_type: str = "mlp_actor_critic"

    @field_validator("model_type")
    @classmethod
    def _known_model_type(cls, value: str) -> str:
        return check_registered("model", value)
