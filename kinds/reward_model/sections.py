"""The sections of a reward-model run (a scalar-head model trained on preference pairs).

:class:`kinds.reward_model.config.RewardModelConfig` assembles them with the shared
sections; each holds only fields the reward_model kind reads.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from rl_core.config.limits import (
    MAX_EPOCHS,
    MAX_MINIBATCHES,
    MAX_PROMPTS,
    MAX_SAMPLE_ROWS,
    MAX_TOKENS,
)
from rl_core.config.llm_sections import FSDPConfig, HuggingFaceModelConfig
from rl_core.config.run_sections import EvalConfig
from rl_core.config.sections import Section
from rl_core.config.training_sections import ActorConfig


class PreferenceDataConfig(Section):
    """Preference pairs of a reward-model run: synthetic arithmetic, or files of rows."""

    source: Literal["arithmetic", "files"] = Field(
        "arithmetic",
        description="Reward model: where the pairs come from: arithmetic (chosen = the "
        "correct answer to an a+b= problem, rejected = a wrong one; held out: the task's "
        "fixed held-out problems) or files (train_files/eval_files rows of prompt, chosen, "
        "rejected).",
    )
    train_files: list[str] = Field(
        default_factory=list,
        description="Reward model, source files: JSONL/JSON files of {prompt, chosen, "
        "rejected} rows.",
    )
    eval_files: list[str] = Field(
        default_factory=list,
        description="Reward model, source files: held-out pair files (none: heldout_fraction "
        "of the training rows is held out).",
    )
    on_bad_row: Literal["skip", "error"] = Field(
        "error", description="Malformed rows: skip them with a warning, or stop before training."
    )
    heldout_fraction: float = Field(
        0.1,
        gt=0.0,
        lt=1.0,
        description="Reward model, source files without eval_files: share of the rows held "
        "out (chosen by a hash of each row's texts, so the split never changes).",
    )
    arithmetic_max_operand: int = Field(
        99, ge=1, le=10_000, description="Reward model, source arithmetic: largest operand."
    )
    arithmetic_ops: list[Literal["+", "-", "*"]] = Field(
        default_factory=lambda: ["+"],
        min_length=1,
        description="Reward model, source arithmetic: operators.",
    )
    max_delta: int = Field(
        5,
        ge=1,
        le=1_000_000,
        description="Reward model, source arithmetic: a rejected answer is the correct one "
        "plus a non-zero delta of at most this size.",
    )
    shorter_fraction: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Reward model, source arithmetic: share of pairs whose rejected response "
        "is the correct answer said at length ('19, since 12+7=19'): the model learns to "
        "prefer the shorter of two correct answers.",
    )
    digit_error_fraction: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Reward model, source arithmetic: share of the wrong answers that have "
        "one digit written wrong (a wrong tens digit is off by 10 to 90) instead of being off "
        "by at most max_delta.",
    )
    eval_size: int = Field(
        200, ge=1, le=MAX_PROMPTS, description="Reward model: held-out pairs scored per evaluation."
    )
    pairs_per_batch: int = Field(
        32, ge=1, le=MAX_PROMPTS, description="Reward model: pairs per optimizer step."
    )
    max_length: int = Field(
        64,
        ge=2,
        le=MAX_TOKENS,
        description="Reward model: longest prompt + response (tokens); longer texts keep "
        "their last max_length tokens.",
    )

    @model_validator(mode="after")
    def _files_given(self) -> PreferenceDataConfig:
        if self.source == "files" and not self.train_files:
            raise ValueError("data.source = 'files' needs data.train_files (JSONL/JSON files)")
        if self.source == "arithmetic" and (self.train_files or self.eval_files):
            raise ValueError(
                "data.train_files/eval_files are read with data.source = 'files'; this run's "
                "source is 'arithmetic' (allowed: no files, or source: files)"
            )
        return self


class RewardModelModelConfig(HuggingFaceModelConfig):
    """The reward model: a Hugging Face causal LM backbone with a scalar head."""

    model_type: str = "hf_reward_model"


class RewardModelActorConfig(ActorConfig):
    """The FSDP2 trainer of a reward model."""

    micro_batch_size: int = Field(
        32,
        ge=1,
        le=MAX_MINIBATCHES,
        description="Reward model: pairs per forward/backward (gradient accumulation).",
    )
    steps_per_iteration: int = Field(
        1,
        ge=1,
        le=MAX_EPOCHS,
        description="Reward model: optimizer steps, each on the next data.pairs_per_batch "
        "pairs, per iteration.",
    )
    fsdp_config: FSDPConfig = Field(default_factory=lambda: FSDPConfig())

    #: The trainer backend (reward models train with FSDP2 only).
    backend: ClassVar[str] = "fsdp"

    @property
    def tensor_parallel_size(self) -> int:
        """Ranks each layer is split across (1: FSDP2 is data parallel)."""
        return 1

    @property
    def data_parallel_size(self) -> int:
        """Model replicas the batch is split across (every trainer rank)."""
        return self.num_workers

    @property
    def update_micro_batch_size(self) -> int:
        """Pairs per forward/backward."""
        return self.micro_batch_size


class RewardModelAlgorithmConfig(Section):
    """The training objective of a reward model."""

    loss_type: Literal["bradley_terry"] = Field(
        "bradley_terry",
        description="Reward model: the loss; bradley_terry is the mean of "
        "-log sigmoid(r_chosen - r_rejected) over the pairs.",
    )


class RewardModelEvalConfig(EvalConfig):
    """Pairwise accuracy and reward margin on the held-out pairs."""

    sample_rows: int = Field(
        8,
        ge=0,
        le=MAX_SAMPLE_ROWS,
        description="Reward model: held-out pairs (with their rewards) logged as an MLflow "
        "table per evaluation.",
    )
