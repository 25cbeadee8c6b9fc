"""``demos``: the demonstration dataset behaviour cloning trains on (``rlpipe sft``)."""

from __future__ import annotations

from pydantic import Field

from rl_core.config.limits import MAX_EPISODES, MAX_WORKERS
from rl_core.config.sections import Section


class DemosConfig(Section):
    """Demonstrations: where they are, how they are collected when missing, how BC samples."""

    path: str | None = Field(
        None,
        min_length=1,
        description="Folder of a demonstration dataset (demos.json and shards); None: "
        "<run.output_dir>/demos/<env.env_type>-<digest of the env and demos settings>-seed"
        "<run.seed>. `rlpipe sft` collects it first with the env's scripted expert when it "
        "is missing.",
    )
    episodes: int = Field(
        100, ge=1, le=MAX_EPISODES, description="Episodes to collect when the dataset is missing."
    )
    num_workers: int = Field(
        2, ge=1, le=MAX_WORKERS, description="Parallel collection tasks (each plays a share)."
    )
    action_noise: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="Std of Gaussian noise on the expert's actions while collecting "
        "(mixed-quality data for offline RL).",
    )
    successful_only: bool = Field(
        True, description="Behaviour cloning keeps only the episodes that succeeded."
    )
    batch_size: int = Field(256, ge=1, le=1_000_000, description="Steps per BC minibatch.")
    steps_per_iteration: int = Field(
        10, ge=1, le=100_000, description="BC gradient steps per SFT iteration."
    )
