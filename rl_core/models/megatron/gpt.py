"""Build a megatron-core ``GPTModel`` with the architecture of a Hugging Face causal LM."""

from __future__ import annotations

import copy
from typing import Any

from rl_core.models.megatron.config import HFShape, padded_vocab_size, transformer_config
from rl_core.models.megatron.cpu_modules import SDPACoreAttention, keep_rotary_on_cpu


def layer_spec(cpu_attention: bool) -> Any:
    """Megatron's local layer spec (RMSNorm); ``cpu_attention`` swaps in SDPA attention."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    if cpu_attention:
        spec = copy.deepcopy(spec)
        spec.submodules.self_attention.submodules.core_attention = SDPACoreAttention
    return spec


def build_gpt_model(
    shape: HFShape,
    tp: int = 1,
    sequence_parallel: bool = False,
    precision: str = "float32",
    vocab_divisible_by: int = 128,
    *,
    cpu_attention: bool,
) -> Any:
    """This rank's ``GPTModel`` (tensor-parallel process groups must be initialized).

    Args:
        shape: The Hugging Face model's sizes (:meth:`HFShape.from_hf`).
        tp: Tensor-parallel size.
        sequence_parallel: Megatron sequence parallelism (with ``tp > 1``).
        precision: ``float32``, ``bfloat16`` or ``float16`` parameters.
        vocab_divisible_by: The vocabulary is padded to a multiple of this times ``tp``.
        cpu_attention: Use the CPU modules of :mod:`.cpu_modules`: true when the model
            computes on the CPU (the caller knows the rank's device).

    Returns:
        The model. Its logits ``[batch, seq, padded_vocab / tp]`` are this rank's slice of
        the padded vocabulary (megatron's gather allocates on the GPU; a vocabulary-parallel
        log-softmax needs no gather).
    """
    from megatron.core.models.gpt import GPTModel

    model = GPTModel(
        transformer_config(shape, tp, sequence_parallel, precision),
        layer_spec(cpu_attention),
        vocab_size=padded_vocab_size(shape.vocab_size, tp, vocab_divisible_by),
        max_sequence_length=shape.max_positions,
        share_embeddings_and_output_weights=shape.tie_embeddings,
        position_embedding_type="rope",
        rotary_base=shape.rope_theta,
        parallel_output=True,
    )
    if cpu_attention:
        keep_rotary_on_cpu(model)
    return model
