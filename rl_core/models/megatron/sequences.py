"""How a micro-batch's rows reach a megatron-core ``GPTModel``: padded or packed.

* Padded (:func:`padded_logits`): rows come left-padded (prompt) and right-padded
  (response); megatron's rotary positions start at 0 in every row, so each row is shifted
  left by its prompt padding first: its tokens then sit at positions 0, 1, … as the Hugging
  Face policy's position ids put them, and the padding moves behind them, where causal
  attention keeps it from every real token.
* Packed (:func:`packed_logits`): the rows' real tokens as one sequence
  (:func:`~rl_core.llm.packing.pack_rows`) in megatron's ``thd`` format: a
  ``PackedSeqParams`` carries the row boundaries (``cu_seqlens``), megatron's rotary
  embedding restarts its positions at each boundary and the core attention keeps every
  row to itself (Transformer Engine's fused attention on a GPU,
  :class:`~.cpu_modules.SDPACoreAttention` on the CPU). Only real tokens are computed.

Both return the logits that predict each response token, on this rank's vocabulary slice.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rl_core.llm.packing import PackedRows


def pack_left(ids: torch.Tensor, left_pad: torch.Tensor) -> torch.Tensor:
    """Shift row ``i`` of ``ids`` left by ``left_pad[i]`` (the padding wraps to the end)."""
    length = ids.shape[1]
    index = (torch.arange(length, device=ids.device) + left_pad.unsqueeze(1)) % length
    return ids.gather(1, index)


def padded_logits(model: nn.Module, forward_inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[N, R, W]`` logits predicting each response column (padding columns included)."""
    prompt_ids, response_ids = forward_inputs["prompt_ids"], forward_inputs["response_ids"]
    prompt_len = prompt_ids.shape[1]
    left_pad = prompt_len - forward_inputs["prompt_mask"].sum(dim=1).long()
    ids = pack_left(torch.cat([prompt_ids, response_ids], dim=1), left_pad)
    positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    logits = model(ids, positions, attention_mask=None)  # [N, L, W]
    # logits predicting response token j: shifted position prompt_len - 1 - left_pad + j
    steps = torch.arange(response_ids.shape[1], device=ids.device)
    at = (prompt_len - 1 - left_pad).unsqueeze(1) + steps
    return logits.gather(1, at.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))


def accepts_packed_sequences(model: nn.Module) -> bool:
    """Whether every core attention of ``model`` takes ``thd`` packed sequences.

    Megatron's local ``DotProductAttention`` (its layer spec without Transformer Engine)
    refuses them; Transformer Engine's ``TEDotProductAttention`` and
    :class:`~.cpu_modules.SDPACoreAttention` take them.
    """
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    cores = [m.core_attention for m in model.modules() if hasattr(m, "core_attention")]
    return bool(cores) and not any(isinstance(c, DotProductAttention) for c in cores)


def thd_inputs(packed: PackedRows, multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """``input_ids``, ``position_ids`` ``[1, T']`` and the ``PackedSeqParams`` of ``packed``.

    Args:
        packed: The packed rows.
        multiple: Make the sequence length a multiple of this (sequence parallelism splits
            the sequence over the tensor-parallel ranks): the filler tokens (id 0) form a
            sequence of their own, which no row attends to.
    """
    from megatron.core.packed_seq_params import PackedSeqParams

    ids, positions, bounds = packed.input_ids, packed.position_ids, packed.cu_seqlens
    longest = packed.max_length
    fill = -packed.num_tokens % multiple
    if fill:
        ids = torch.cat([ids, ids.new_zeros(1, fill)], dim=1)
        positions = torch.cat([positions, torch.arange(fill, device=ids.device)[None]], dim=1)
        bounds = torch.cat([bounds, bounds[-1:] + fill])
        longest = max(longest, fill)
    params = PackedSeqParams(
        qkv_format="thd",
        cu_seqlens_q=bounds,
        cu_seqlens_kv=bounds,
        max_seqlen_q=longest,
        max_seqlen_kv=longest,
    )
    return ids, positions, params


def packed_logits(model: nn.Module, packed: PackedRows, multiple: int = 1) -> torch.Tensor:
    """``[K, W]`` logits predicting each real response token (``packed.targets``).

    Args:
        model: The ``GPTModel`` (its core attention must take packed sequences,
            :func:`accepts_packed_sequences`).
        packed: The rows, packed.
        multiple: Pad the packed sequence to a multiple of this (:func:`thd_inputs`).
    """
    ids, positions, params = thd_inputs(packed, multiple)
    logits = model(ids, positions, attention_mask=None, packed_seq_params=params)  # [1, T, W]
    return logits[0, packed.logit_positions]
