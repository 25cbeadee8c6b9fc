"""The configuration class of the reward-model kind."""

from __future__ import annotations

from pydantic import Field, model_validator

from kinds.reward_model.sections import (
    PreferenceDataConfig,
    RewardModelActorConfig,
    RewardModelAlgorithmConfig,
    RewardModelEvalConfig,
    RewardModelModelConfig,
)
from rl_core.config.schema import RLPipeConfig
from rl_core.models.model_path import local_model_problem


class RewardModelConfig(RLPipeConfig):
    """The configuration of a reward-model run."""

    kind_name = "reward_model"

    data: PreferenceDataConfig = Field(default_factory=PreferenceDataConfig)
    model: RewardModelModelConfig = Field(default_factory=RewardModelModelConfig)
    algorithm: RewardModelAlgorithmConfig = Field(default_factory=RewardModelAlgorithmConfig)
    actor: RewardModelActorConfig = Field(default_factory=RewardModelActorConfig)
    eval: RewardModelEvalConfig = Field(default_factory=RewardModelEvalConfig)

    def pretrained_model(self) -> RewardModelModelConfig:
        """The ``model`` section: a Hugging Face model."""
        return self.model

    @model_validator(mode="after")
    def _model_files_exist(self) -> RewardModelConfig:
        if self.run.warm_start:
            return self  # the warm start's export provides the backbone
        path = self.model.model_path
        if not path:
            raise ValueError(
                "model.model_path is required for model_type hf_reward_model (a local Hugging "
                "Face causal LM directory: the backbone)"
            )
        problem = None if self.model.tiny_init else local_model_problem(path)
        if problem is None:
            return self  # (the tiny model is created, a hub id found, before any worker starts)
        raise ValueError(
            f"{problem}; build the tiny test model with 'python scripts/build_tiny_lm.py "
            "<dir>' or set model.tiny_init: true"
        )

    @model_validator(mode="after")
    def _batch_divides(self) -> RewardModelConfig:
        if self.data.pairs_per_batch % self.actor.num_workers:
            raise ValueError(
                f"data.pairs_per_batch = {self.data.pairs_per_batch} must divide into "
                f"actor.num_workers = {self.actor.num_workers} equal parts"
            )
        return self
