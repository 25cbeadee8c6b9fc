"""Attention that keeps packed rows apart, for Hugging Face models.

A packed micro-batch (:mod:`rl_core.llm.packing`) is one sequence holding many rows.
Attention must stay inside each row:

* ``flash_attention_2`` / ``3`` / ``4`` do it natively: they take the row boundaries
  (``cu_seq_lens_q``/``cu_seq_lens_k``) and run their variable-length kernels, which skip
  padding entirely (the fastest path on a GPU).
* ``sdpa`` and ``eager`` do not; :func:`use_packed_attention` switches such a model to
  :data:`PACKED_SDPA`. It gathers rows of similar length into buckets (:func:`~rl_core.llm.packing.length_buckets`)
  and runs one causal ``scaled_dot_product_attention`` per bucket, each row right-padded to
  its bucket's longest: under a causal mask a real token never sees the padding behind it,
  so the result is exact, and the work stays close to that of the real tokens (a
  block-diagonal mask over the whole packed sequence would cost its length squared; one call
  per row would cost a kernel launch per row and layer). Unpacked calls (generation, padded
  batches) go to plain ``sdpa`` with the usual mask, so the model computes what it did.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from rl_core.llm.packing import length_buckets

#: The registered name of the row-by-row attention.
PACKED_SDPA = "rlpipe_packed_sdpa"
#: Attention implementations that handle packed rows themselves.
NATIVE_VARLEN = ("flash_attention_2", "flash_attention_3", "flash_attention_4")
#: Implementations :func:`use_packed_attention` replaces with :data:`PACKED_SDPA`.
REPLACED = ("sdpa", "eager", PACKED_SDPA)
_FLASH_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
#: The keyword carrying :func:`length_buckets` from the model's call to its layers.
BUCKETS_KWARG = "packed_buckets"


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
        **kwargs: ``cu_seq_lens_q`` (row boundaries) marks a packed call, and
            ``packed_buckets`` (:func:`length_buckets` of them, computed once per forward
            pass rather than per layer) may come with it; the rest goes to ``sdpa``.

    Returns:
        ``([1, T, heads, d], None)`` like every Hugging Face attention function.
    """
    bounds = kwargs.pop("cu_seq_lens_q", None)
    buckets = kwargs.pop(BUCKETS_KWARG, None)
    for name in _FLASH_KWARGS:
        kwargs.pop(name, None)
    if bounds is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"packed attention takes one packed sequence, got {query.shape[0]}")
    if buckets is None:
        buckets = length_buckets(bounds)
    out = query.new_zeros(1, query.shape[2], query.shape[1], value.shape[-1])
    for bucket in buckets:
        q, k, v = (t[0][:, bucket.index].transpose(0, 1) for t in (query, key, value))
        part, _ = sdpa_attention_forward(module, q, k, v, None, is_causal=True, **kwargs)
        out[0, bucket.positions] = part[bucket.valid]  # [rows, width, heads, d] → real tokens
    return out, None


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


def packed_forward_kwargs(
    model: torch.nn.Module, cu_seqlens: torch.Tensor, max_length: int
) -> dict[str, Any]:
    """The keywords a packed call of ``model`` takes besides ids and positions.

    The row boundaries in flash attention's names, a prepared mask of None for every layer
    type (so the model builds no ``[T, T]`` mask for the packed sequence) and, for
    :data:`PACKED_SDPA`, the rows' length buckets (computed once for every layer).
    """
    kwargs: dict[str, Any] = {
        "attention_mask": {"full_attention": None, "sliding_attention": None},
        "cu_seq_lens_q": cu_seqlens,
        "cu_seq_lens_k": cu_seqlens,
        "max_length_q": max_length,
        "max_length_k": max_length,
    }
    if getattr(model.config, "_attn_implementation", None) == PACKED_SDPA:
        kwargs[BUCKETS_KWARG] = length_buckets(cu_seqlens)
    return kwargs
