"""The configuration class of the embodied kind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import Field, model_validator

from kinds.embodied.demos_section import DemosConfig
from kinds.embodied.off_policy_sections import ReplayConfig, off_policy_problems
from kinds.embodied.sections import (
    EmbodiedAlgorithmConfig,
    EmbodiedEvalConfig,
    EmbodiedModelConfig,
    EmbodiedRolloutConfig,
)
from rl_core.config import limits
from rl_core.config.policy_sections import EnvConfig
from rl_core.config.schema import RLPipeConfig

#: Estimators that score whole episodes/sequences (not usable by the per-step PPO trainer).
OUTCOME_ESTIMATORS = {
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "token_gae",
}


class EmbodiedConfig(RLPipeConfig):
    """The configuration of an embodied run."""

    kind_name = "embodied"
    supports_async = True

    env: EnvConfig = Field(default_factory=EnvConfig)
    model: EmbodiedModelConfig = Field(default_factory=EmbodiedModelConfig)
    rollout: EmbodiedRolloutConfig = Field(default_factory=EmbodiedRolloutConfig)
    algorithm: EmbodiedAlgorithmConfig = Field(default_factory=EmbodiedAlgorithmConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    eval: EmbodiedEvalConfig = Field(default_factory=EmbodiedEvalConfig)
    demos: DemosConfig = Field(default_factory=DemosConfig)

    def pretrained_model(self) -> EmbodiedModelConfig | None:  # type: ignore[override]
        """The ``model`` section when it names a Hugging Face backbone (``vla_oft``)."""
        return self.model if self.model.model_path else None

    def warm_started(self, model_dir: str) -> EmbodiedConfig:
        """Start from the warm start's exported policy (``model.init_weights``).

        A policy with a Hugging Face backbone (``vla_oft``) exports the backbone's own
        directory beside its weights: it becomes ``model.model_path`` too.
        """
        update = {"init_weights": model_dir}
        if (Path(model_dir) / "config.json").is_file():
            update["model_path"] = model_dir
        return self.model_copy(update={"model": self.model.model_copy(update=update)})

    def demos_path(self) -> str:
        """The demonstration dataset's folder (``demos.path`` or its default).

        The default names the env type, a digest of what the episodes depend on (the env
        settings other than how many envs run, the collection's settings) and the seed:
        ``<run.output_dir>/demos/metaworld-3f9c2a1b-seed0``.
        """
        if self.demos.path:
            return self.demos.path
        env = self.env.model_dump(mode="json", exclude={"num_envs", "num_workers", "group_size"})
        made = {"env": env, "episodes": self.demos.episodes, "noise": self.demos.action_noise}
        if self.demos.import_from:  # (datasets made before the field keep their folder)
            made["import_from"] = str(Path(self.demos.import_from).expanduser().resolve())
        digest = hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.run.output_dir}/demos/{self.env.env_type}-{digest}-seed{self.run.seed}"

    def demonstrations(self, supervised: bool) -> str | None:
        """The demonstration dataset's folder when the run trains on one, else None.

        Behaviour cloning (``supervised``) and offline algorithms (``iql``) do.
        """
        from rl_core.algorithms.actor_critic_family import actor_critic_spec

        spec = actor_critic_spec(self.algorithm.loss_type)
        offline = spec is not None and spec.offline
        return self.demos_path() if supervised or offline else None

    def env_section(self) -> EnvConfig:
        """``env``: the environment the policy acts in."""
        return self.env

    def records_videos(self) -> bool:
        """``eval.video``."""
        return self.eval.video

    @model_validator(mode="after")
    def _advantage_fits_model(self) -> EmbodiedConfig:
        adv = self.algorithm.adv_type.lower()
        if adv in OUTCOME_ESTIMATORS:
            raise ValueError(
                f"algorithm.adv_type = {adv!r} scores whole episodes/sequences per group; the "
                "embodied PPO trainer collects per-step rewards and needs a per-step "
                "estimator such as 'gae'"
            )
        if adv == "episode_grpo":
            if self.env.group_size < 2:
                raise ValueError(
                    "algorithm.adv_type = 'episode_grpo' compares the episodes of envs that "
                    f"share a reset seed: env.group_size must be 2 or more, got {self.env.group_size}"
                )
            ends = [
                name
                for name in ("terminate_on_success", "reset_on_success")
                if getattr(self.env.manipulation, name)
            ]
            if ends:
                raise ValueError(
                    "algorithm.adv_type = 'episode_grpo' takes one whole episode per env per "
                    f"rollout, but env.manipulation.{ends[0]} = true ends episodes early: set "
                    "it to false"
                )
            chunk = self.env.manipulation.action_chunk
            limit = self.env.max_episode_steps
            episode = None if limit is None else -(-limit // chunk)  # policy steps
            if episode != self.rollout.num_steps:
                per_chunk = f" / env.manipulation.action_chunk ({chunk}), rounded up" * (chunk > 1)
                raise ValueError(
                    "algorithm.adv_type = 'episode_grpo' takes one whole episode per env per "
                    f"rollout: rollout.num_steps ({self.rollout.num_steps}) must equal "
                    f"env.max_episode_steps ({limit}){per_chunk}"
                )
        if self.actor.num_workers > 1:
            raise ValueError(
                f"actor.num_workers = {self.actor.num_workers}: the embodied MLP trainer is "
                "single-process (data-parallel FSDP2 trainers are for reasoning models)"
            )
        return self

    @model_validator(mode="after")
    def _off_policy_fits(self) -> EmbodiedConfig:
        from rl_core.algorithms.actor_critic_family import actor_critic_spec, algorithms_training

        spec = actor_critic_spec(self.algorithm.loss_type)
        if spec is None:
            model = self.model.model_type.lower()
            allowed = algorithms_training(model)
            if allowed:
                raise ValueError(
                    f"model.model_type = {model!r} is trained by an off-policy algorithm; "
                    f"algorithm.loss_type = {self.algorithm.loss_type!r} (allowed: "
                    f"{', '.join(allowed)})"
                )
            return self
        problems = off_policy_problems(self, spec)
        if problems:
            raise ValueError(
                f"algorithm.loss_type = {self.algorithm.loss_type!r}: " + "; ".join(problems)
            )
        return self

    @model_validator(mode="after")
    def _stages_divide(self) -> EmbodiedConfig:
        stages, envs = self.rollout.pipeline_stages, self.env.num_envs
        if envs % stages or (envs // stages) % self.env.group_size:
            raise ValueError(
                f"rollout.pipeline_stages ({stages}) must divide env.num_envs ({envs}) into "
                f"slices that are multiples of env.group_size ({self.env.group_size})"
            )
        return self

    @model_validator(mode="after")
    def _batched_in_one_stage(self) -> EmbodiedConfig:
        if self.env.vectorization == "batched" and self.rollout.pipeline_stages > 1:
            raise ValueError(
                f"env.vectorization = 'batched' holds an env worker's envs in one simulator, "
                f"which cannot be split into rollout.pipeline_stages = "
                f"{self.rollout.pipeline_stages}: set rollout.pipeline_stages=1 (or "
                "env.vectorization=sync to pipeline single envs)"
            )
        return self

    @model_validator(mode="after")
    def _batch_divides(self) -> EmbodiedConfig:
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
    def _rollout_buffer_fits_memory(self) -> EmbodiedConfig:
        estimate = limits.embodied_buffer(
            self.env.num_workers, self.env.num_envs, self.rollout.num_steps
        )
        memory = limits.machine_memory_bytes()
        if memory is not None and estimate.bytes > memory:
            raise ValueError(estimate.describe(memory))
        return self
