"""The sections of an embodied run (control policies in simulated environments).

Each extends its shared section with the fields only the embodied kind reads;
:class:`rl_core.config.embodied.EmbodiedConfig` assembles them with ``env`` and ``replay``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from kinds.embodied.off_policy_sections import IQLConfig, OffPolicyConfig
from rl_core.config.limits import (
    MAX_CONV_LAYERS,
    MAX_ENVS,
    MAX_EPISODES,
    MAX_EVAL_STEPS,
    MAX_ITERATIONS,
    MAX_LAYER_WIDTH,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_VIDEO_FRAMES,
)
from rl_core.config.policy_sections import ModelConfig
from rl_core.config.run_sections import EvalConfig
from rl_core.config.training_sections import AlgorithmConfig, RolloutConfig


class EmbodiedModelConfig(ModelConfig):
    """The control policy (MLP or CNN actor-critic, SAC, a VLA, or an extension's)."""

    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    activation: Literal["tanh", "relu", "gelu"] = "tanh"
    continuous_action: Literal["clip", "tanh"] = Field(
        "clip", description="Continuous actions: Gaussian clipped to bounds, or tanh-squashed."
    )
    init_log_std: float = 0.0
    init_weights: str | None = Field(
        None,
        min_length=1,
        description="Folder of an exported model (rlpipe_model.json) whose weights the "
        "policy starts from; run.init_from sets it to the model it downloads.",
    )
    critic_hidden_sizes: list[int] | None = Field(
        None,
        description="mlp_sac, mlp_iql: hidden widths of each critic (mlp_iql: and of V; None: "
        "hidden_sizes).",
    )
    num_critics: int = Field(
        2, ge=1, le=64, description="mlp_sac, mlp_iql: Q critics in the ensemble."
    )
    critic_norm: Literal["none", "layer_norm", "batch_renorm"] = Field(
        "none",
        description="mlp_sac, mlp_iql: normalization after each hidden critic layer.",
    )
    cnn_channels: list[int] = Field(
        default_factory=lambda: [32, 64, 64],
        description="pixel_actor_critic, vla_oft: output channels of the image encoder's conv "
        "layers (3x3, stride 2, ReLU; one layer each) over main_images.",
    )
    cnn_feature_dim: int = Field(
        256,
        ge=1,
        le=MAX_LAYER_WIDTH,
        description="pixel_actor_critic, vla_oft: size of the image features (the linear "
        "layer after the convs).",
    )
    model_path: str | None = Field(
        None,
        min_length=1,
        description="vla_oft: Hugging Face causal LM of the backbone (and its tokenizer): a "
        "local directory, or a hub id in the local Hugging Face cache (model.hub_download "
        "fetches a missing one); read with from_pretrained (*.safetensors only).",
    )
    hub_download: bool = Field(
        False,
        description="vla_oft: download a hub-id model_path that is not in the local Hugging "
        "Face cache (safetensors weights, no code).",
    )
    tiny_init: bool = Field(
        False,
        description="vla_oft: create the tiny byte-level test backbone at model_path when it "
        "does not exist (nothing is downloaded; for CPU runs and tests); a relative "
        "model_path is then under run.output_dir.",
    )
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        "float32", description="vla_oft: weight dtype of the backbone (bfloat16 on GPU)."
    )
    trust_remote_code: bool = Field(
        False, description="vla_oft: allow the backbone's own code (its config's auto_map)."
    )
    num_image_tokens: int = Field(
        8,
        ge=1,
        le=4096,
        description="vla_oft: visual token embeddings per image, before the instruction.",
    )
    max_instruction_tokens: int = Field(
        64,
        ge=1,
        le=MAX_TOKENS,
        description="vla_oft: instruction (task_descriptions) length in tokens; shorter ones "
        "are padded, longer ones truncated (with a warning).",
    )
    action_chunk: int = Field(
        1,
        ge=1,
        le=4096,
        description="vla_oft: actions per chunk (learned action queries, decoded in one "
        "forward pass); must divide the size of the env's action Box (action_chunk x "
        "per-step action size).",
    )

    @field_validator("cnn_channels")
    @classmethod
    def _conv_channels(cls, value: list[int]) -> list[int]:
        if not 1 <= len(value) <= MAX_CONV_LAYERS or any(
            not 1 <= c <= MAX_LAYER_WIDTH for c in value
        ):
            raise ValueError(
                f"must list 1 to {MAX_CONV_LAYERS} conv layers, each with 1 to "
                f"{MAX_LAYER_WIDTH} channels"
            )
        return value

    @field_validator("hidden_sizes", "critic_hidden_sizes")
    @classmethod
    def _positive_sizes(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return value
        if not value or any(not 1 <= h <= MAX_LAYER_WIDTH for h in value):
            raise ValueError(
                f"must be a non-empty list of layer widths from 1 to {MAX_LAYER_WIDTH}"
            )
        return value


class EmbodiedRolloutConfig(RolloutConfig):
    """Env steps collected per iteration."""

    num_steps: int = Field(128, ge=1, le=MAX_STEPS, description="Env steps per env per iteration.")
    pipeline_stages: int = Field(
        1,
        ge=1,
        le=MAX_ENVS,
        description="Env slices with requests in flight at once (hides the Ray round trip); "
        "must divide env.num_envs.",
    )


class EmbodiedAlgorithmConfig(AlgorithmConfig):
    """PPO-style estimators plus the off-policy algorithms' settings."""

    off_policy: OffPolicyConfig = Field(default_factory=lambda: OffPolicyConfig())
    iql: IQLConfig = Field(default_factory=lambda: IQLConfig())


class EmbodiedEvalConfig(EvalConfig):
    """Evaluation episodes (deterministic actions by default) and videos."""

    num_episodes: int = Field(10, ge=1, le=MAX_EPISODES)
    num_envs: int = Field(10, ge=1, le=MAX_ENVS)
    deterministic: bool = True
    max_steps: int = Field(
        100_000, ge=1, le=MAX_EVAL_STEPS, description="Safety cap on steps per evaluation."
    )
    video: bool = Field(
        True,
        description="Embodied: record one deterministic episode as a GIF "
        "(eval/videos/episode_<step>.gif) at the final evaluation; envs without rgb_array "
        "rendering are skipped.",
    )
    video_interval: int = Field(
        0,
        ge=0,
        le=MAX_ITERATIONS,
        description="Also record a video at the evaluations of iterations that are multiples "
        "of this (0 = final evaluation only).",
    )
    video_max_frames: int = Field(
        125, ge=2, le=MAX_VIDEO_FRAMES, description="Most frames in a video (after frame skipping)."
    )
    video_frame_skip: int = Field(
        4, ge=1, le=MAX_VIDEO_FRAMES, description="Keep every n-th rendered frame."
    )
    video_scale: float = Field(
        0.5, gt=0.0, le=1.0, description="Frame size relative to the env's render size."
    )
