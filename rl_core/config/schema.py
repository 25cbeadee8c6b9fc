"""The shared part of every run's configuration; each kind of training extends it.

Defaults live in this module, the section modules it assembles (``run_sections``,
``cluster_section``, ``policy_sections``, ``training_sections``) and each kind package's own
section modules (``kinds/<kind>/sections.py``). Sections follow RLinf's layout
(``run``, ``cluster``, ``env``, ``model``, ``rollout``, ``algorithm``, ``actor``, ``reward``,
``eval``, ``tracking``) plus ``timeouts``. :class:`RLPipeConfig` holds the sections every
kind reads; a kind's config class (:class:`rl_core.kind.Kind`) replaces ``model``,
``rollout``, ``algorithm``, ``actor``, ``reward`` and ``eval`` with its own extensions of
them and adds its own sections (``env`` and ``replay``, ``data``). Unknown keys are
rejected, and names of pluggable parts (env/model/advantage/loss/reward types) are checked
against their registries so a typo fails before any worker starts. Floats must be finite,
counts and sizes have upper bounds (:mod:`rl_core.config.limits`) and the rollout batch must
fit in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from rl_core.config.cluster_section import ClusterConfig
from rl_core.config.hybrid import hybrid_engine_blockers
from rl_core.config.policy_sections import ModelConfig
from rl_core.config.run_sections import EvalConfig, RunConfig, TimeoutsConfig, TrackingConfig
from rl_core.config.sections import Section
from rl_core.config.training_sections import (
    ActorConfig,
    AlgorithmConfig,
    RewardConfig,
    RolloutConfig,
)

if TYPE_CHECKING:
    from rl_core.config.llm_sections import HuggingFaceModelConfig

__all__ = [
    "ActorConfig",
    "AlgorithmConfig",
    "ModelConfig",
    "RLPipeConfig",
    "RewardConfig",
    "RolloutConfig",
]


class RLPipeConfig(Section):
    """The sections every kind of training reads (a kind's config class extends it)."""

    #: Name of the kind of training this class configures (set by each kind's class).
    kind_name: ClassVar[str] = ""
    #: The category of the models it trains when that is not ``kind_name`` (a kind that
    #: refines another, as online refines reasoning).
    model_category: ClassVar[str] = ""
    #: Whether ``run.mode: async`` is possible for this kind.
    supports_async: ClassVar[bool] = False

    preset: str = Field("custom", description="Name of the preset this config came from.")
    run: RunConfig = Field(default_factory=RunConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    actor: ActorConfig = Field(default_factory=ActorConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)

    # What a kind's runs have: each kind's config class answers for its own sections, so code
    # shared by every kind asks here instead of probing the config's shape.

    def env_section(self) -> Any | None:
        """The ``env`` section when the run's policy acts in an environment, else None."""
        return None

    def pretrained_model(self) -> HuggingFaceModelConfig | None:
        """The ``model`` section when it names a Hugging Face model (``model_path``)."""
        return None

    def lora_adapters(self) -> Any | None:
        """The ``actor.lora`` section when the run trains LoRA adapters, else None."""
        return None

    def reward_model_section(self) -> Any | None:
        """The ``reward.model`` section when a model scores the rewards, else None."""
        return None

    def records_videos(self) -> bool:
        """Whether evaluations may record videos (``eval.video``)."""
        return False

    def demonstrations(self, supervised: bool) -> str | None:
        """The folder of the demonstration dataset the run trains on (None: none).

        Args:
            supervised: The run is supervised fine-tuning (``flows/sft.py``).
        """
        return None

    def warm_started(self, model_dir: str) -> RLPipeConfig:
        """This config starting from the warm start's exported model in ``model_dir``.

        A language model is the model directory itself (``model.model_path``).
        """
        return self.model_copy(
            update={"model": self.model.model_copy(update={"model_path": model_dir})}
        )

    def scoring_fanout_min_seconds(self) -> float | None:
        """Scoring time per batch above which reward scoring fans out to Ray tasks.

        None: this kind never fans scoring out; 0: it fans out from the start.
        """
        return None

    @property
    def category(self) -> str:
        """The category of the models this config trains (``embodied``, ``reasoning``...).

        The kind of training, or the kind it refines: an online run's category is
        ``reasoning``.
        """
        return self.model_category or self.kind_name

    @model_validator(mode="after")
    def _async_mode_fits(self) -> RLPipeConfig:
        if self.run.mode == "async" and not self.supports_async:
            raise ValueError(
                f"run.mode = 'async' runs embodied and reasoning models; this run's model "
                f"({self.model.model_type}) is {self.category} (allowed: 'sync')"
            )
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
