"""Stand-ins for the two megatron-core modules that need CUDA, for models on the CPU.

* Megatron's local ``DotProductAttention`` takes its score buffer from a CUDA memory pool:
  :class:`SDPACoreAttention` takes its place in the layer spec (same inputs and output
  layout, computed with ``torch.nn.functional.scaled_dot_product_attention``), and also
  takes packed sequences (``thd``) as Transformer Engine's attention does on a GPU.
* ``RotaryEmbedding`` moves its frequencies to the current CUDA device on first use:
  :func:`keep_rotary_on_cpu` makes a model's rotary embedding compute them where they are.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from rl_core.llm.packing import length_buckets


def keep_rotary_on_cpu(model: nn.Module) -> None:
    """Make ``model.rotary_pos_emb`` (megatron's ``RotaryEmbedding``) stay on the CPU."""
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

    class CPURotaryEmbedding(RotaryEmbedding):
        def get_emb(self, max_seq_len: int, offset: int = 0) -> torch.Tensor:
            freqs = self.get_freqs_non_repeated(max_seq_len, offset)
            if self.rotary_interleaved:
                emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1)
                emb = emb.view(freqs.shape[0], -1)
            else:
                emb = torch.cat((freqs, freqs), dim=-1)
            return emb[:, None, None, :]

    rotary = model.rotary_pos_emb
    if type(rotary) is not RotaryEmbedding:
        raise TypeError(f"expected megatron's RotaryEmbedding, got {type(rotary).__name__}")
    rotary.__class__ = CPURotaryEmbedding


class SDPACoreAttention(nn.Module):
    """Causal attention over one tensor-parallel rank's heads (grouped-query aware).

    Padded rows (megatron's ``sbhd`` layout) or packed sequences (``thd``, with megatron's
    ``PackedSeqParams``: rows end to end, each attending to itself only), as Transformer
    Engine's attention takes them on a GPU.

    Args:
        config: The layer's ``TransformerConfig``.
        layer_number: Megatron's layer number (unused; part of the module contract).
        attn_mask_type: Megatron's mask type (the mask is always causal here).
        attention_type: Megatron's attention type (unused).
        attention_dropout: Must be 0 or None (dropout is not implemented).
        softmax_scale: Scale of the scores (default ``1 / sqrt(head_dim)``).
        **kwargs: Other arguments megatron passes (process groups, context parallel).
    """

    def __init__(
        self,
        config: Any,
        layer_number: int,
        attn_mask_type: Any,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        tp = config.tensor_model_parallel_size
        self.heads = config.num_attention_heads // tp
        self.groups = config.num_query_groups // tp
        self.scale = softmax_scale or 1.0 / math.sqrt(config.kv_channels)
        dropout = config.attention_dropout if attention_dropout is None else attention_dropout
        if dropout:
            raise ValueError("SDPACoreAttention has no dropout; set attention_dropout=0")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: Any = None,
        attention_bias: Any = None,
        packed_seq_params: Any = None,
    ) -> torch.Tensor:
        """Causal attention over padded rows or packed sequences.

        Padded rows (``packed_seq_params`` None): ``[s, b, heads, d]`` queries and
        ``[s, b, groups, d]`` keys/values → ``[s, b, heads·d]``. Packed sequences
        (``qkv_format="thd"``): ``[t, heads, d]`` queries and ``[t, groups, d]`` keys/values
        of sequences laid end to end at ``cu_seqlens_q`` → ``[t, heads·d]``, each sequence
        attending causally to itself only.

        Raises:
            ValueError: A padding mask, an attention bias (rows come packed left, so the
                causal mask is the only one needed), or packed sequences in another format
                than ``thd`` or with padded or different query/key boundaries.
        """
        if attention_mask is not None or attention_bias is not None:
            raise ValueError(
                "SDPACoreAttention takes no padding mask or bias: pack rows left or pass "
                "packed sequences"
            )
        if packed_seq_params is not None:
            return self._packed(query, key, value, packed_seq_params)
        key, value = self._repeat_kv(key, value, dim=2)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, h, s, d]
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        out = out.permute(2, 0, 1, 3)  # [s, b, h, d]
        return out.reshape(out.shape[0], out.shape[1], -1)

    def _repeat_kv(
        self, key: torch.Tensor, value: torch.Tensor, dim: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values with each query group's head repeated for its query heads."""
        repeat = self.heads // self.groups
        if repeat == 1:
            return key, value
        return key.repeat_interleave(repeat, dim=dim), value.repeat_interleave(repeat, dim=dim)

    def _packed(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, params: Any
    ) -> torch.Tensor:
        """Causal attention of each ``thd`` sequence to itself: ``[t, heads·d]``."""
        if params.qkv_format != "thd":
            raise ValueError(
                f"SDPACoreAttention packs only qkv_format 'thd', not {params.qkv_format!r}"
            )
        bounds = params.cu_seqlens_q
        padded = (params.cu_seqlens_q_padded, params.cu_seqlens_kv_padded)
        if any(p is not None for p in padded) or not torch.equal(bounds, params.cu_seqlens_kv):
            raise ValueError(
                "SDPACoreAttention packs self-attention only: cu_seqlens_kv must equal "
                "cu_seqlens_q and no padded boundaries"
            )
        key, value = self._repeat_kv(key, value, dim=1)
        cuts = bounds.tolist()
        if cuts[0] != 0 or cuts[-1] != query.shape[0]:
            raise ValueError(
                f"cu_seqlens span {cuts[0]}..{cuts[-1]}, not the {query.shape[0]} tokens"
            )
        out = torch.zeros_like(query)
        for bucket in length_buckets(bounds):  # rows of similar length, one call each
            q, k, v = (t[bucket.index].permute(0, 2, 1, 3) for t in (query, key, value))
            part = nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.scale
            )  # [rows, h, width, d]; a real token never sees the padding behind it
            out[bucket.positions] = part.permute(0, 2, 1, 3)[bucket.valid]
        return out.reshape(query.shape[0], query.shape[1] * query.shape[2])
