"""Weights between a Hugging Face Qwen2/Llama causal LM and megatron-core ``GPTModel`` shards.

Megatron keeps q, k and v in one ``linear_qkv`` tensor laid out per key/value group
(``[q heads of the group, k, v]``), so a tensor-parallel rank's rows are whole groups; the
MLP's gate and up projections are one ``linear_fc1`` tensor holding this rank's slice of
each; the vocabulary is padded with zero rows and split over the ranks. Row-parallel
layers (``linear_proj``, ``linear_fc2``) split their input dimension. Norms are copied to
every rank. With fewer key/value heads than tensor-parallel ranks, each key/value head is
copied into as many query groups as it has ranks (:func:`~.config.kv_copies`); the way
back reads the first copy. Both directions only move, copy and split tensors, so a round
trip is exact.
"""

from __future__ import annotations

import torch

from rl_core.models.megatron.config import HFShape, kv_copies

Tensors = dict[str, torch.Tensor]
_HF_LAYER = "model.layers.{i}."
_MC_LAYER = "decoder.layers.{i}."
#: Norm weights, the same on every rank: megatron name → Hugging Face name (per layer).
_LAYER_NORMS = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
}
#: Row-parallel weights (input dimension split): megatron name → Hugging Face name.
_ROW_PARALLEL = {
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
}


def qkv_layout(shape: HFShape, tp: int) -> tuple[int, int, int]:
    """``(query groups, query heads per group, head dim)`` of ``linear_qkv`` at size ``tp``."""
    groups = shape.num_kv_heads * kv_copies(shape, tp)
    return groups, shape.num_heads // groups, shape.head_dim


def _fuse_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: HFShape, tp: int
) -> torch.Tensor:
    groups, per_group, dim = qkv_layout(shape, tp)
    copies = kv_copies(shape, tp)
    rest = q.shape[1:]
    kv_heads = shape.num_kv_heads
    parts = (
        q.reshape(groups, per_group * dim, *rest),
        k.reshape(kv_heads, dim, *rest).repeat_interleave(copies, dim=0),
        v.reshape(kv_heads, dim, *rest).repeat_interleave(copies, dim=0),
    )
    return torch.cat(parts, dim=1).reshape(groups * (per_group + 2) * dim, *rest)


def _split_qkv(fused: torch.Tensor, shape: HFShape, tp: int) -> tuple[torch.Tensor, ...]:
    groups, per_group, dim = qkv_layout(shape, tp)
    copies = kv_copies(shape, tp)
    rest = fused.shape[1:]
    q, k, v = fused.reshape(groups, (per_group + 2) * dim, *rest).split(
        [per_group * dim, dim, dim], dim=1
    )
    return (
        q.reshape(groups * per_group * dim, *rest),
        k[::copies].reshape(shape.num_kv_heads * dim, *rest),
        v[::copies].reshape(shape.num_kv_heads * dim, *rest),
    )


def _pad_rows(weight: torch.Tensor, rows: int) -> torch.Tensor:
    pad = weight.new_zeros(rows - weight.shape[0], *weight.shape[1:])
    return torch.cat([weight, pad])


def hf_to_megatron(hf: Tensors, shape: HFShape, tp: int, rank: int, padded_vocab: int) -> Tensors:
    """The state dict of tensor-parallel rank ``rank`` of ``tp`` from a Hugging Face one.

    Args:
        hf: The Hugging Face model's state dict (``model.…`` and ``lm_head.weight`` names).
        shape: The model's sizes.
        tp: Tensor-parallel size.
        rank: This rank.
        padded_vocab: The padded vocabulary (:func:`~.config.padded_vocab_size`).
    """

    def shard(t: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return t.chunk(tp, dim=dim)[rank].clone()

    out: Tensors = {
        "embedding.word_embeddings.weight": shard(
            _pad_rows(hf["model.embed_tokens.weight"], padded_vocab)
        ),
        "decoder.final_layernorm.weight": hf["model.norm.weight"].clone(),
    }
    if not shape.tie_embeddings:
        out["output_layer.weight"] = shard(_pad_rows(hf["lm_head.weight"], padded_vocab))
    for i in range(shape.num_layers):
        src, dst = _HF_LAYER.format(i=i), _MC_LAYER.format(i=i)
        for mc, name in _LAYER_NORMS.items():
            out[dst + mc] = hf[src + name].clone()
        for mc, name in _ROW_PARALLEL.items():
            out[dst + mc] = shard(hf[src + name], dim=1)
        kinds = ("weight", "bias") if shape.qkv_bias else ("weight",)
        for kind in kinds:
            q, k, v = (hf[f"{src}self_attn.{p}_proj.{kind}"] for p in "qkv")
            out[f"{dst}self_attention.linear_qkv.{kind}"] = shard(_fuse_qkv(q, k, v, shape, tp))
        gate, up = hf[src + "mlp.gate_proj.weight"], hf[src + "mlp.up_proj.weight"]
        out[dst + "mlp.linear_fc1.weight"] = torch.cat([shard(gate), shard(up)])
    return out


def megatron_to_hf(ranks: list[Tensors], shape: HFShape) -> Tensors:
    """The Hugging Face state dict from every tensor-parallel rank's state dict, in rank order.

    ``lm_head.weight`` is included (equal to the embeddings when they are tied, as the
    Hugging Face model's own state dict has it); the vocabulary padding is dropped.
    """
    vocab = shape.vocab_size

    def joined(name: str, dim: int = 0) -> torch.Tensor:
        return torch.cat([r[name] for r in ranks], dim=dim)

    embed = joined("embedding.word_embeddings.weight")[:vocab]
    head = embed if shape.tie_embeddings else joined("output_layer.weight")[:vocab]
    out: Tensors = {
        "model.embed_tokens.weight": embed.clone(),
        "model.norm.weight": ranks[0]["decoder.final_layernorm.weight"].clone(),
        "lm_head.weight": head.clone(),
    }
    for i in range(shape.num_layers):
        src, dst = _MC_LAYER.format(i=i), _HF_LAYER.format(i=i)
        for mc, name in _LAYER_NORMS.items():
            out[dst + name] = ranks[0][src + mc].clone()
        for mc, name in _ROW_PARALLEL.items():
            out[dst + name] = joined(src + mc, dim=1)
        kinds = ("weight", "bias") if shape.qkv_bias else ("weight",)
        for kind in kinds:
            qkv = _split_qkv(joined(f"{src}self_attention.linear_qkv.{kind}"), shape, len(ranks))
            for p, tensor in zip("qkv", qkv, strict=True):
                out[f"{dst}self_attn.{p}_proj.{kind}"] = tensor.contiguous()
        halves = [r[src + "mlp.linear_fc1.weight"].chunk(2) for r in ranks]
        out[dst + "mlp.gate_proj.weight"] = torch.cat([h[0] for h in halves])
        out[dst + "mlp.up_proj.weight"] = torch.cat([h[1] for h in halves])
    return out


def reshard(ranks: list[Tensors], shape: HFShape, tp: int, padded_vocab: int) -> list[Tensors]:
    """Tensor-parallel shards of one size as shards of another (exact; e.g. TP 2 → TP 1).

    Args:
        ranks: Every rank's state dict at the old size, in rank order.
        shape: The model's sizes.
        tp: The new tensor-parallel size.
        padded_vocab: The padded vocabulary at the new size.
    """
    hf = megatron_to_hf(ranks, shape)
    return [hf_to_megatron(hf, shape, tp, rank, padded_vocab) for rank in range(tp)]
