"""Hugging Face config → megatron-core ``TransformerConfig`` (Qwen2 / Llama family).

Only what the bridge can convert exactly is accepted; anything else (another architecture,
rope scaling, sliding windows, an activation other than SiLU, sizes a tensor-parallel size
does not divide) raises :class:`MegatronBridgeError` naming the field and its value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rl_core.models.causal_lm import DTYPES

#: Hugging Face ``model_type`` → whether its attention projections q/k/v carry a bias.
QKV_BIAS: dict[str, Callable[[Any], bool]] = {
    "qwen2": lambda hf: True,
    "llama": lambda hf: bool(getattr(hf, "attention_bias", False)),
}


class MegatronBridgeError(ValueError):
    """A Hugging Face model or a parallel layout the megatron bridge cannot convert."""


@dataclass(frozen=True)
class HFShape:
    """The sizes of a Hugging Face causal LM the bridge needs."""

    model_type: str
    vocab_size: int
    hidden_size: int
    ffn_hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float
    norm_eps: float
    qkv_bias: bool
    tie_embeddings: bool
    init_std: float
    max_positions: int

    @classmethod
    def from_hf(cls, hf: Any) -> HFShape:
        """Read and check ``hf`` (a ``transformers`` config).

        Raises:
            MegatronBridgeError: An architecture or option the bridge does not convert.
        """
        model_type = getattr(hf, "model_type", None)
        if model_type not in QKV_BIAS:
            raise MegatronBridgeError(
                f"model_type {model_type!r} has no megatron bridge; supported: "
                f"{', '.join(sorted(QKV_BIAS))}"
            )
        act = getattr(hf, "hidden_act", "silu")
        if act != "silu":
            raise MegatronBridgeError(f"hidden_act {act!r} is not supported (only 'silu')")
        if getattr(hf, "use_sliding_window", False):
            raise MegatronBridgeError("use_sliding_window=True is not supported")
        rope = dict(getattr(hf, "rope_parameters", None) or getattr(hf, "rope_scaling", None) or {})
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise MegatronBridgeError(f"rope_type {rope_type!r} is not supported (only 'default')")
        theta = rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))
        heads = hf.num_attention_heads
        return cls(
            model_type=model_type,
            vocab_size=hf.vocab_size,
            hidden_size=hf.hidden_size,
            ffn_hidden_size=hf.intermediate_size,
            num_layers=hf.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=getattr(hf, "num_key_value_heads", None) or heads,
            head_dim=getattr(hf, "head_dim", None) or hf.hidden_size // heads,
            rope_theta=float(theta),
            norm_eps=float(hf.rms_norm_eps),
            qkv_bias=QKV_BIAS[model_type](hf),
            tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
            init_std=float(getattr(hf, "initializer_range", 0.02)),
            max_positions=int(getattr(hf, "max_position_embeddings", 4096)),
        )


def tensor_parallel_problems(shape: HFShape, tp: int) -> list[str]:
    """Why ``tp`` ranks cannot split ``shape`` (empty when they can).

    Key/value heads either split over the ranks or, when there are fewer of them than
    ranks, are copied so that every rank holds one (:func:`kv_copies`).
    """
    sizes = {
        "num_attention_heads": shape.num_heads,
        "intermediate_size": shape.ffn_hidden_size,
    }
    problems = [
        f"tensor_model_parallel_size {tp} does not divide {name} ({value})"
        for name, value in sizes.items()
        if value % tp
    ]
    kv = shape.num_kv_heads
    if kv % tp and tp % kv:
        problems.append(
            f"tensor_model_parallel_size {tp} neither divides num_key_value_heads ({kv}) nor "
            "is a multiple of it"
        )
    return problems


def kv_copies(shape: HFShape, tp: int) -> int:
    """Copies of each key/value head at tensor-parallel size ``tp`` (1: no copies).

    With fewer key/value heads than ranks (``tp`` a multiple of them), each head is copied
    to ``tp / num_key_value_heads`` neighbouring ranks, as vLLM does; megatron then sees
    ``tp`` query groups. The trainer sums the copies' gradients so they stay equal.
    """
    kv = shape.num_kv_heads
    return 1 if kv % tp == 0 else tp // kv


def padded_vocab_size(vocab_size: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron's padded vocabulary: a multiple of ``divisible_by × tp``."""
    step = divisible_by * tp
    return -(-vocab_size // step) * step


def transformer_config(
    shape: HFShape,
    tp: int = 1,
    sequence_parallel: bool = False,
    precision: str = "float32",
) -> Any:
    """The megatron ``TransformerConfig`` of ``shape`` split over ``tp`` ranks.

    Fusions and dropout are off (exact parity with the Hugging Face model; CPU friendly);
    parameters are created (and randomly initialized) on the CPU.

    Raises:
        MegatronBridgeError: ``tp`` does not divide the heads or the MLP width, or an
            unknown precision.
    """
    from megatron.core.transformer.transformer_config import TransformerConfig

    problems = tensor_parallel_problems(shape, tp)
    if problems:
        raise MegatronBridgeError("; ".join(problems))
    if precision not in DTYPES:
        raise MegatronBridgeError(f"precision {precision!r}: allowed {sorted(DTYPES)}")
    return TransformerConfig(
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_heads,
        num_query_groups=shape.num_kv_heads * kv_copies(shape, tp),
        kv_channels=shape.head_dim,
        normalization="RMSNorm",
        layernorm_epsilon=shape.norm_eps,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        init_method_std=shape.init_std,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        apply_query_key_layer_scaling=False,
        attention_softmax_in_fp32=True,
        use_cpu_initialization=True,
        # Weights come from the Hugging Face model, but initialization also marks which
        # parameters are tensor-parallel shards (gradient norm, checkpoints rely on it).
        perform_initialization=True,
        params_dtype=DTYPES[precision],
        bf16=precision == "bfloat16",
        fp16=precision == "float16",
        tensor_model_parallel_size=tp,
        sequence_parallel=sequence_parallel and tp > 1,
    )
