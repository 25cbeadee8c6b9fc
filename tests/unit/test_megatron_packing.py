"""The pieces of megatron packing that need no process group: the CPU attention's ``thd``
path, the packed inputs, and which attention takes packed sequences. (The megatron policy's
packed vs padded parity runs on gloo ranks: tests/unit/test_megatron_bridge.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from megatron.core.packed_seq_params import PackedSeqParams
from megatron.core.transformer.dot_product_attention import DotProductAttention
from torch import nn

from rl_core.llm import pad_left, pad_right
from rl_core.llm.packing import pack_rows
from rl_core.models.megatron.config import HFShape
from rl_core.models.megatron.cpu_modules import SDPACoreAttention
from rl_core.models.megatron.policy import MegatronCausalLM
from rl_core.models.megatron.sequences import accepts_packed_sequences, thd_inputs
from rl_core.models.tiny_lm import tiny_qwen2_config

HEADS, GROUPS, DIM = 4, 2, 8


def attention() -> SDPACoreAttention:
    config = SimpleNamespace(
        tensor_model_parallel_size=1,
        num_attention_heads=HEADS,
        num_query_groups=GROUPS,
        kv_channels=DIM,
        attention_dropout=0.0,
    )
    return SDPACoreAttention(config, 1, None, "self")


def thd(bounds: list[int], **fields) -> PackedSeqParams:
    cu = torch.tensor(bounds, dtype=torch.int32)
    longest = max(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    params = dict(qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu)
    params.update(max_seqlen_q=longest, max_seqlen_kv=longest, **fields)
    return PackedSeqParams(**params)


def test_packed_sequences_attend_each_to_itself_as_separate_rows() -> None:
    """``[t, heads, d]`` with grouped key/value heads → ``[t, heads·d]``, equal to each
    sequence computed alone in megatron's padded ``[s, b, heads, d]`` layout."""
    torch.manual_seed(0)
    bounds = [0, 5, 5, 12, 14]  # an empty sequence in the middle
    core = attention()
    q = torch.randn(14, HEADS, DIM)
    k, v = torch.randn(14, GROUPS, DIM), torch.randn(14, GROUPS, DIM)
    out = core(q, k, v, None, packed_seq_params=thd(bounds))
    assert out.shape == (14, HEADS * DIM)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if a == b:
            continue
        alone = core(q[a:b, None], k[a:b, None], v[a:b, None], None)  # [s, 1, h·d]
        torch.testing.assert_close(out[a:b], alone[:, 0], rtol=0, atol=1e-6)


def test_packed_attention_refuses_what_it_does_not_compute() -> None:
    core = attention()
    q, kv = torch.randn(6, HEADS, DIM), torch.randn(6, GROUPS, DIM)
    with pytest.raises(ValueError, match="only qkv_format 'thd'"):
        core(q, kv, kv, None, packed_seq_params=PackedSeqParams(qkv_format="sbhd"))
    padded = thd([0, 6], cu_seqlens_q_padded=torch.tensor([0, 6], dtype=torch.int32))
    with pytest.raises(ValueError, match="no padded boundaries"):
        core(q, kv, kv, None, packed_seq_params=padded)
    with pytest.raises(ValueError, match="not the 6 tokens"):
        core(q, kv, kv, None, packed_seq_params=thd([0, 2, 5]))
    with pytest.raises(ValueError, match="no padding mask"):
        core(q, kv, kv, torch.ones(1, dtype=torch.bool), packed_seq_params=thd([0, 6]))


def test_thd_inputs_fill_to_a_multiple_with_a_sequence_of_their_own() -> None:
    p_ids, p_mask = pad_left([[5, 6, 7], [8]], 0)
    r_ids, r_mask = pad_right([[9, 10], [11, 12, 13, 14]], 0)
    rows = pack_rows(p_ids, p_mask, r_ids, r_mask)  # 5 + 5 tokens
    ids, positions, params = thd_inputs(rows)
    assert ids is rows.input_ids and params.cu_seqlens_q.tolist() == [0, 5, 10]
    assert (params.qkv_format, params.max_seqlen_q, params.max_seqlen_kv) == ("thd", 5, 5)
    ids, positions, params = thd_inputs(rows, multiple=4)
    assert ids.tolist() == [[5, 6, 7, 9, 10, 8, 11, 12, 13, 14, 0, 0]]
    assert positions.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]]
    assert params.cu_seqlens_q.tolist() == params.cu_seqlens_kv.tolist() == [0, 5, 10, 12]
    assert params.cu_seqlens_q.dtype == torch.int32 and params.max_seqlen_q == 5


class _LocalAttention(DotProductAttention):
    """Megatron's local attention class (not built: it needs model-parallel groups)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)


def _model(core: nn.Module) -> nn.Module:
    layer = nn.Module()
    layer.core_attention = core
    return nn.ModuleList([layer])


def test_only_attentions_that_take_thd_pack() -> None:
    """Megatron's local attention asserts packed_seq_params is None: the policy then pads."""
    assert accepts_packed_sequences(_model(attention()))
    assert not accepts_packed_sequences(_model(_LocalAttention()))
    assert not accepts_packed_sequences(nn.Linear(2, 2))  # no attention found
    policy = MegatronCausalLM(_model(_LocalAttention()), HFShape.from_hf(tiny_qwen2_config(260)))
    assert not policy.supports_packing
    inputs = {k: torch.ones(1, 2, dtype=torch.long) for k in ("prompt_ids", "response_ids")}
    with pytest.raises(ValueError, match="thd packed sequences"):
        policy(forward_type="default_forward", forward_inputs=inputs, packed=True)
