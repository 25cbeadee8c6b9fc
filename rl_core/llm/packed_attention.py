"""Attention that keeps packed rows apart, for Hugging Face models.

A packed micro-batch (:mod:`rl_core.llm.packing`) is one sequence holding many rows.
Attention must stay inside each row:

* ``flash_attention_2`` / ``3`` / ``4`` do it natively: they take the row boundaries
  (``cu_seq_lens_q``/``cu_seq_lens_k``) and run their variable-length kernels, which skip
  padding entirely (the fastest path on a GPU).
* ``sdpa`` and ``eager`` do not; :func:`use_packed_attention` switches such a model to
  :data:`PACKED_SDPA`, which computes ``scaled_dot_product_attention`` row by row (causal
  within each row: the work of the real tokens only, where a block-diagonal mask over the
  whole packed sequence would cost its length squared). Unpacked calls (generation, padded
  batches) go to plain ``sdpa`` with the usual mask, so the model computes what it did.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

#: The registered name of the row-by-row attention.
PACKED_SDPA = "rlpipe_packed_sdpa"
#: Attention implementations that handle packed rows themselves.
NATIVE_VARLEN = ("flash_attention_2", "flash_attention_3", "flash_attention_4")
#: Implementations :func:`use_packed_attention` replaces with :data:`PACKED_SDPA`.
REPLACED = ("sdpa", "eager", PACKED_SDPA)
_FLASH_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")


def packed_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each packed row; plain ``sdpa`` without row boundaries.

    Args:
        module: The attention layer.
        query: ``[1, heads, T, d]``.
        key: ``[1, kv_heads, T, d]``.
        value: ``[1, kv_heads, T, d]``.
        attention_mask: The mask of an unpacked call (None for a packed one).
        **kwargs: ``cu_seq_lens_q`` (row boundaries) marks a packed call; the rest goes to
            ``sdpa``.

    Returns:
        ``([1, T, heads, d], None)`` like every Hugging Face attention function.
    """
    bounds = kwargs.pop("cu_seq_lens_q", None)
    for name in _FLASH_KWARGS:
        kwargs.pop(name, None)
    if bounds is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"packed attention takes one packed sequence, got {query.shape[0]}")
    edges = bounds.tolist()
    outs = []
    for start, end in zip(edges[:-1], edges[1:], strict=True):
        if end > start:
            out, _ = sdpa_attention_forward(
                module,
                query[:, :, start:end],
                key[:, :, start:end],
                value[:, :, start:end],
                None,
                is_causal=True,
                **kwargs,
            )
            outs.append(out)
    return torch.cat(outs, dim=1), None


AttentionInterface.register(PACKED_SDPA, packed_sdpa_forward)
AttentionMaskInterface.register(PACKED_SDPA, sdpa_mask)


def use_packed_attention(model: torch.nn.Module) -> str:
    """Make ``model`` (a Hugging Face ``PreTrainedModel``) keep packed rows apart.

    Returns:
        The attention implementation it uses now.

    Raises:
        ValueError: Its attention implementation handles neither (e.g. ``flex_attention``).
    """
    current = getattr(model.config, "_attn_implementation", None) or "eager"
    if current in NATIVE_VARLEN:
        return current
    if current not in REPLACED:
        raise ValueError(
            f"model.attn_implementation = {current!r} cannot keep packed rows apart; "
            f"allowed with actor.packing: {', '.join((*NATIVE_VARLEN, 'sdpa', 'eager'))} "
            "(or actor.packing: false)"
        )
    if current != PACKED_SDPA:
        model.set_attn_implementation(PACKED_SDPA)
    return PACKED_SDPA


def packed_forward_kwargs(cu_seqlens: torch.Tensor, max_length: int) -> dict[str, Any]:
    """The keywords a packed call of a Hugging Face model takes besides ids and positions.

    The row boundaries in flash attention's names, and a prepared mask of None for every
    layer type, so the model builds no ``[T, T]`` mask for the packed sequence.
    """
    return {
        "attention_mask": {"full_attention": None, "sliding_attention": None},
        "cu_seq_lens_q": cu_seqlens,
        "cu_seq_lens_k": cu_seqlens,
        "max_length_q": max_length,
        "max_length_k": max_length,
    }
