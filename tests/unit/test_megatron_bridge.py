"""The Hugging Face ↔ megatron-core bridge: config mapping, exact weight round trips, and
logits equal to the Hugging Face model's at tensor-parallel sizes 1 and 2 (gloo, CPU);
packed rows (megatron's thd format) compute what padded rows compute."""

from __future__ import annotations

import json

import pytest
import torch
import torch.multiprocessing as mp
from transformers import AutoModelForCausalLM, LlamaConfig

from infra.processes import free_port
from rl_core.models.megatron.config import (
    HFShape,
    MegatronBridgeError,
    kv_copies,
    padded_vocab_size,
    tensor_parallel_problems,
)
from rl_core.models.megatron.weights import hf_to_megatron, megatron_to_hf, reshard
from rl_core.models.tiny_lm import create_tiny_lm, tiny_qwen2_config
from tests import megatron_ranks


def _llama(**overrides) -> LlamaConfig:
    fields = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
        attention_bias=False,
    )
    return LlamaConfig(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("config", "tp"),
    [
        (tiny_qwen2_config(260), 1),  # GQA with one key/value head, tied, q/k/v bias
        (tiny_qwen2_config(260, num_key_value_heads=2), 2),
        (_llama(), 2),  # untied output layer, no bias, two heads per group
        (tiny_qwen2_config(260), 2),  # one key/value head copied to both ranks
        (_llama(num_key_value_heads=2), 4),  # two key/value heads, each on two ranks
    ],
)
def test_round_trip_is_exact(config, tp: int) -> None:
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config)
    shape = HFShape.from_hf(hf.config)
    state = hf.state_dict()
    padded = padded_vocab_size(shape.vocab_size, tp)
    ranks = [hf_to_megatron(state, shape, tp, r, padded) for r in range(tp)]
    assert ranks[0]["embedding.word_embeddings.weight"].shape == (padded // tp, 64)
    if tp > 1:  # each rank holds a different slice
        name = "decoder.layers.0.self_attention.linear_qkv.weight"
        assert not torch.equal(ranks[0][name], ranks[1][name])
    back = megatron_to_hf(ranks, shape)
    assert sorted(back) == sorted(state)
    for name, tensor in state.items():
        assert torch.equal(back[name], tensor), name


def test_shards_of_one_tensor_parallel_size_reshard_to_another_exactly() -> None:
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(_llama(num_key_value_heads=4))
    shape = HFShape.from_hf(hf.config)
    state = hf.state_dict()
    sizes = {tp: padded_vocab_size(shape.vocab_size, tp) for tp in (1, 2, 4)}
    two = [hf_to_megatron(state, shape, 2, r, sizes[2]) for r in range(2)]
    for tp in (1, 4):
        direct = [hf_to_megatron(state, shape, tp, r, sizes[tp]) for r in range(tp)]
        converted = reshard(two, shape, tp, sizes[tp])
        for want, got in zip(direct, converted, strict=True):
            assert sorted(want) == sorted(got)
            assert all(torch.equal(want[k], got[k]) for k in want)


def test_shape_reads_the_qwen2_and_llama_fields() -> None:
    qwen = HFShape.from_hf(tiny_qwen2_config(260))
    assert (qwen.num_heads, qwen.num_kv_heads, qwen.head_dim) == (2, 1, 32)
    assert qwen.qkv_bias and qwen.tie_embeddings
    llama = HFShape.from_hf(_llama(rope_theta=5e5))
    assert not llama.qkv_bias and not llama.tie_embeddings
    assert llama.rope_theta == 5e5


def test_unsupported_models_and_layouts_are_named() -> None:
    with pytest.raises(MegatronBridgeError, match="model_type 'gpt2' has no megatron bridge"):
        HFShape.from_hf(AutoModelForCausalLM.from_config(_gpt2()).config)
    with pytest.raises(MegatronBridgeError, match="hidden_act 'gelu'"):
        HFShape.from_hf(_llama(hidden_act="gelu"))
    with pytest.raises(MegatronBridgeError, match="rope_type 'linear'"):
        HFShape.from_hf(_llama(rope_scaling={"rope_type": "linear", "factor": 2.0}))
    assert tensor_parallel_problems(HFShape.from_hf(tiny_qwen2_config(260)), 2) == []
    wide = _llama(hidden_size=96, num_attention_heads=6)
    problems = tensor_parallel_problems(HFShape.from_hf(wide), 3)
    assert problems == [
        "tensor_model_parallel_size 3 does not divide intermediate_size (128)",
        "tensor_model_parallel_size 3 neither divides num_key_value_heads (2) nor is a "
        "multiple of it",
    ]


def test_copied_key_value_heads_are_the_same_on_each_rank() -> None:
    hf = AutoModelForCausalLM.from_config(tiny_qwen2_config(260))
    shape = HFShape.from_hf(hf.config)
    assert (kv_copies(shape, 1), kv_copies(shape, 2)) == (1, 2)
    padded = padded_vocab_size(shape.vocab_size, 2)
    ranks = [hf_to_megatron(hf.state_dict(), shape, 2, r, padded) for r in range(2)]
    name = "decoder.layers.0.self_attention.linear_qkv.weight"
    # per rank: [one query head (32 rows), k (32 rows), v (32 rows)]
    assert ranks[0][name].shape == (96, 64)
    assert torch.equal(ranks[0][name][32:], ranks[1][name][32:])
    assert not torch.equal(ranks[0][name][:32], ranks[1][name][:32])


def _gpt2():
    from transformers import GPT2Config

    return GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)


KV_HEADS = {"kv2": 2, "kv1-copied": 1}


@pytest.fixture(scope="module")
def parity_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The checks of ``tests/megatron_ranks.py`` on 2 gloo ranks (one spawn for all), for a
    model with 2 key/value heads (one per rank at TP 2: every policy loss and aggregation
    mode) and with 1 (copied to both: the default loss and mode)."""
    root = tmp_path_factory.mktemp("megatron")
    jobs = []
    for name, heads in KV_HEADS.items():
        model_dir = create_tiny_lm(root / name / "tiny", num_key_value_heads=heads)
        jobs.append((str(model_dir), str(root / name), heads == 2))
    mp.spawn(megatron_ranks.all_checks, args=(2, free_port(), jobs), nprocs=2, join=True)
    return {
        name: {r: json.loads((root / name / f"rank{r}.json").read_text()) for r in range(2)}
        for name in KV_HEADS
    }


@pytest.fixture(params=list(KV_HEADS))
def parity(parity_runs: dict[str, dict], request: pytest.FixtureRequest) -> dict:
    """One model's results by rank, and whether every loss was checked."""
    return {**parity_runs[request.param], "every_loss": KV_HEADS[request.param] == 2}


def test_logits_equal_hugging_face_at_tp_1_and_2(parity: dict) -> None:
    for rank in range(2):
        for tp in ("tp2", "tp1"):
            result = parity[rank]["logits"][tp]
            assert result["max_abs_diff"] < 1e-5, (rank, tp, result)
            assert result["round_trip_exact"], (rank, tp)


def test_policy_logprobs_entropy_and_gradients_equal_the_hf_policys(parity: dict) -> None:
    for tp in ("tp2", "tp1"):
        r = parity[0]["policy"][tp]
        assert r["grad_scale"] > 1e-3, "the loss has no gradient: the test proves nothing"
        assert r["logprobs"] < 1e-5 and r["entropy"] < 1e-5, (tp, r)
        assert r["grads"] < 1e-5, (tp, r)


def test_packed_rows_compute_what_padded_rows_compute(parity: dict) -> None:
    """Megatron's thd packed sequences (rotary positions restart per row, attention within
    each row) against the padded rows, on every tensor-parallel rank."""
    for rank in range(2):
        for tp in ("tp2", "tp1"):
            r = parity[rank]["policy"][tp]["packed"]
            assert r["supported"], "SDPACoreAttention takes packed sequences"
            assert r["logprobs"] < 1e-5 and r["entropy"] < 1e-5, (rank, tp, r)
            assert r["padding"] == 0.0, (rank, tp, r)
            assert r["grads"] < 1e-5, (rank, tp, r)
            assert r["filler"] < 1e-5, (rank, tp, r)  # a filler sequence changes nothing


def test_an_update_equals_the_single_process_hf_update(parity: dict) -> None:
    """TP 2 (one replica) and TP 1 × DP 2, every policy loss and aggregation mode (packed
    micro-batches); the default loss and mode also padded and packed by a token budget."""
    result = parity[0]["update"]
    # every loss × 4 aggregation modes × 2 layouts (kv2); the default loss and mode (kv1);
    # the default loss and mode with 2 other micro-batchings × 2 layouts
    assert len(result) >= (8 if parity["every_loss"] else 2) + 4, result
    variants = [case for case in result if case.endswith(("/padded", "/token-budget"))]
    assert len(variants) == 4, variants
    for case, r in result.items():
        assert r["moved"] > 1e-4, f"{case}: the update did not move the weights"
        assert r["weights"] < 1e-5, (case, r)
        assert "train/policy_loss" in r["metrics"] and "train/grad_norm" in r["metrics"], r
        assert max(r["metrics"].values()) < 1e-5, (case, r)
    for case in variants:  # packed with a token budget, or padded: the default's weights
        assert result[case]["vs_default"] < 1e-5, (case, result[case])
