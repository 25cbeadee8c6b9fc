"""``demos``: the demonstration dataset that behaviour cloning and offline RL train on.

Behaviour cloning (``rlpipe sft``) and offline algorithms (``algorithm.loss_type: iql``)
read it; ``rlpipe demos`` collects it.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator

from rl_core.config.limits import MAX_EPISODES, MAX_WORKERS
from rl_core.config.sections import Section

#: Largest std of the noise on demonstrated actions.
MAX_ACTION_NOISE = 10.0


class DemosConfig(Section):
    """Demonstrations: where they are, how they are collected when missing, how they are sampled."""

    path: str | None = Field(
        None,
        min_length=1,
        description="Folder of a demonstration dataset (demos.json and shards); None: "
        "<run.output_dir>/demos/<env.env_type>-<digest of the env and demos settings>-seed"
        "<run.seed>. `rlpipe sft` (and `rlpipe train` of an offline algorithm) collects it "
        "first with the env's scripted expert when it is missing.",
    )
    import_from: str | None = Field(
        None,
        min_length=1,
        description="LIBERO demonstration files (HDF5, one per task, as LIBERO ships them): a "
        "file or a folder of *.hdf5. `rlpipe demos` then converts all their episodes to the "
        "dataset (env.env_type libero; obs_mode rgb or rgb+state) instead of playing an "
        "expert; None: play the env's scripted expert.",
    )
    episodes: int = Field(
        100, ge=1, le=MAX_EPISODES, description="Episodes to collect when the dataset is missing."
    )
    num_workers: int = Field(
        2, ge=1, le=MAX_WORKERS, description="Parallel collection tasks (each plays a share)."
    )
    action_noise: float | list[float] = Field(
        0.0,
        description="Std of Gaussian noise on the expert's actions while collecting, from 0 "
        f"to {MAX_ACTION_NOISE} (mixed-quality data for offline RL); a list gives the "
        "episodes its stds in turn (episode i: action_noise[i % length]), e.g. [0, 1] for "
        "half expert, half noisy episodes.",
    )
    successful_only: bool = Field(
        True,
        description="Behaviour cloning and offline RL keep only the episodes that succeeded.",
    )
    batch_size: int = Field(
        256, ge=1, le=1_000_000, description="Steps per minibatch (BC, offline RL)."
    )
    steps_per_iteration: int = Field(
        10,
        ge=1,
        le=100_000,
        description="Gradient steps per iteration of behaviour cloning (SFT) or offline RL.",
    )

    @field_validator("action_noise", mode="before")
    @classmethod
    def _finite_stds(cls, value: Any) -> Any:
        # before the union's own checks, whose errors name each branch of the union
        for x in value if isinstance(value, list) else [value]:
            if isinstance(x, (int, float)) and not math.isfinite(x):
                raise ValueError("Input should be a finite number")
        return value

    @field_validator("action_noise")
    @classmethod
    def _noise_stds(cls, value: float | list[float]) -> float | list[float]:
        stds = value if isinstance(value, list) else [value]
        if not stds or len(stds) > MAX_EPISODES:
            raise ValueError(f"must list 1 to {MAX_EPISODES} stds")
        if any(not 0.0 <= x <= MAX_ACTION_NOISE for x in stds):
            raise ValueError(f"stds must be from 0 to {MAX_ACTION_NOISE}, got {value}")
        return value
