"""Sequence packing and token-budget micro-batches compute what the padded rows compute.

Packed rows (one sequence, no padding) must give the padded forward pass's log-probs,
entropies, values and gradients within float tolerance; cutting a minibatch into any
micro-batches (rows, token budgets, packed or trimmed, filler passes) must leave its
loss and gradient unchanged for every loss aggregation.
"""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl_core.config import load_config
from rl_core.config.llm_sections import LoraConfig
from rl_core.llm import pad_left, pad_right
from rl_core.llm.packing import pack_rows, real_lengths, trim_padding
from rl_core.models.causal_lm import FORWARD_INPUT_KEYS, CausalLMPolicy
from rl_core.models.lora import with_lora
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import accumulate_minibatch, minibatch_totals
from rl_core.training.micro_batches import (
    MicroBatching,
    first_fit_decreasing,
    micro_batch_rows,
    micro_batches,
)
from tests.llm_batches import llm_algorithm, random_llm_batch

MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=2)


def policy_of(tiny_dir, value_head=False, lora=False):
    torch.manual_seed(0)
    policy = CausalLMPolicy(
        AutoModelForCausalLM.from_pretrained(tiny_dir),
        AutoTokenizer.from_pretrained(tiny_dir),
        value_head=value_head,
    )
    if value_head:  # a zero head would hide a misplaced value
        torch.nn.init.normal_(policy.value_head.weight)
    if lora:
        with_lora(policy, LoraConfig(rank=4, alpha=8))
        for name, p in policy.named_parameters():
            if "lora_B" in name:  # B starts at 0: make the adapters do something
                torch.nn.init.normal_(p, std=0.1)
    return policy.train()


def spread_batch(n=7, seed=0, tool_tokens=True):
    """Rows whose prompts (1-9 tokens) and responses (1-40 tokens) differ widely in length;
    a few response tokens are context only (tool output) unless ``tool_tokens`` is off."""
    batch = random_llm_batch(
        n, seed, group_size=2, prompt_lengths=(1, 10), response_lengths=(1, 41)
    )
    batch.pop("rollout_logprobs")
    if tool_tokens:
        g = torch.Generator().manual_seed(seed + 1)
        keep = torch.rand(batch["response_mask"].shape, generator=g) > 0.2
        batch["loss_mask"] = batch["response_mask"].float() * keep.float()
    return batch


def algo(mode="token-mean"):
    cfg = llm_algorithm(load_config(overrides=["algorithm.adv_type=gae"]).algorithm)
    return cfg.model_copy(
        update={"loss_agg_mode": mode, "kl_coef": 0.1, "entropy_coef": 0.01, "value_coef": 0.5}
    )


def grads(policy):
    return {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}


def assert_same_gradients(policy, want):
    """Every gradient equals ``want``'s up to float rounding (relative to its scale)."""
    got = grads(policy)
    assert set(got) == set(want)
    for name, g in got.items():
        scale = max(1.0, float(want[name].abs().max()))
        torch.testing.assert_close(g, want[name], atol=2e-6 * scale, rtol=1e-4)


def test_pack_rows_lays_rows_end_to_end():
    p_ids, p_mask = pad_left([[5, 6], [7]], 0)
    r_ids, r_mask = pad_right([[8], [9, 10, 11]], 0)
    packed = pack_rows(p_ids, p_mask, r_ids, r_mask)
    assert packed.input_ids.tolist() == [[5, 6, 8, 7, 9, 10, 11]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 0, 1, 2, 3]]
    assert packed.cu_seqlens.tolist() == [0, 3, 7]
    assert packed.max_length == 4
    # response token 8 is predicted at 6 (position 1); 9, 10, 11 at 7, 9, 10 (3, 4, 5)
    assert packed.logit_positions.tolist() == [1, 3, 4, 5]
    assert packed.targets.tolist() == [8, 9, 10, 11]
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert packed.unpack(values).tolist() == [[1.0, 0.0, 0.0], [2.0, 3.0, 4.0]]


def test_pack_rows_refuses_a_response_without_a_prompt():
    p_ids, p_mask = pad_left([[5], []], 0)
    r_ids, r_mask = pad_right([[8], [9]], 0)
    with pytest.raises(ValueError, match="row 1 has response tokens but an empty prompt"):
        pack_rows(p_ids, p_mask, r_ids, r_mask)


def test_trim_padding_keeps_every_real_token():
    batch = spread_batch(5, seed=3)
    trimmed = trim_padding({k: v[[1, 3]] for k, v in batch.items()})
    for key in ("prompt_mask", "response_mask"):
        assert trimmed[key].sum() == batch[key][[1, 3]].sum()
    assert trimmed["response_ids"].shape[1] == int(batch["response_mask"][[1, 3]].sum(1).max())
    assert trimmed["prompt_ids"].shape[1] == int(batch["prompt_mask"][[1, 3]].sum(1).max())
    assert trimmed["loss_mask"].shape == trimmed["response_ids"].shape


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_packed_forward_equals_padded(tiny_dir, lora):
    policy = policy_of(tiny_dir, value_head=not lora, lora=lora)
    batch = spread_batch()
    inputs = {k: batch[k] for k in FORWARD_INPUT_KEYS}
    options = {"compute_values": not lora, "compute_entropy": True, "temperature": 0.7}
    padded = policy(forward_type="default_forward", forward_inputs=inputs, **options)
    packed = policy(forward_type="default_forward", forward_inputs=inputs, packed=True, **options)
    mask = batch["response_mask"].bool()
    assert set(packed) == set(padded)
    for key in padded:
        torch.testing.assert_close(packed[key][mask], padded[key][mask], atol=2e-5, rtol=1e-5)
        assert not packed[key][~mask].any()  # padding holds zeros
    # the padded rows still compute as they did: the model's attention was not broken
    again = policy(forward_type="default_forward", forward_inputs=inputs, **options)
    torch.testing.assert_close(again["logprobs"], padded["logprobs"])


@pytest.mark.parametrize("mode", MODES)
def test_packed_gradients_equal_padded(tiny_dir, mode):
    batch = spread_batch()
    (total,) = minibatch_totals([batch], 1)
    padded = policy_of(tiny_dir)
    loss_padded = accumulate_minibatch(padded, batch, total, algo(mode), batching=7, norm=40.0)
    packed = policy_of(tiny_dir)
    batching = MicroBatching(rows=7, packed=True)
    loss_packed = accumulate_minibatch(packed, batch, total, algo(mode), batching, norm=40.0)
    for term in ("policy_loss", "entropy", "kl_loss"):
        assert loss_packed[term] == pytest.approx(loss_padded[term], rel=1e-5, abs=1e-6)
    assert_same_gradients(packed, grads(padded))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "batching",
    [
        MicroBatching(rows=2),
        MicroBatching(rows=1, max_tokens=50),
        MicroBatching(rows=1, max_tokens=50, packed=True),
        MicroBatching(rows=1, max_tokens=120, packed=True),
    ],
    ids=["rows-2", "budget-50-trimmed", "budget-50-packed", "budget-120-packed"],
)
def test_any_micro_batch_split_leaves_the_loss_unchanged(tiny_dir, mode, batching):
    batch = spread_batch(seed=1)
    (total,) = minibatch_totals([batch], 1)
    whole = policy_of(tiny_dir, value_head=True)
    batch["returns"] = torch.randn(batch["response_ids"].shape)
    batch["old_values"] = torch.randn(batch["response_ids"].shape)
    want_loss = accumulate_minibatch(whole, batch, total, algo(mode), batching=7, norm=40.0)
    split = policy_of(tiny_dir, value_head=True)
    loss = accumulate_minibatch(split, batch, total, algo(mode), batching, norm=40.0)
    for term in ("policy_loss", "entropy", "kl_loss", "value_loss"):
        assert loss[term] == pytest.approx(want_loss[term], rel=1e-5, abs=1e-6)
    assert_same_gradients(split, grads(whole))


def test_first_fit_decreasing_fills_bins_up_to_the_budget():
    lengths = [30, 5, 25, 10, 40, 12, 8]
    bins = first_fit_decreasing(lengths, 50)
    assert sorted(r for b in bins for r in b) == list(range(len(lengths)))
    assert all(sum(lengths[r] for r in b) <= 50 for b in bins)
    assert len(bins) == 3  # 130 tokens need at least 3 bins of 50
    # a row over the budget is a micro-batch of its own
    assert first_fit_decreasing([70, 10], 50) == [[0], [1]]


def test_token_budget_micro_batches_hold_at_most_the_budget():
    batch = spread_batch(16, seed=2)
    lengths = real_lengths(batch).tolist()
    rows = micro_batch_rows(lengths, MicroBatching(rows=1, max_tokens=60))
    assert all(sum(lengths[r] for r in part) <= 60 for part in rows)
    assert len(rows) == -(-sum(lengths) // 60) or len(rows) <= len(lengths)
    # at least as many as asked (ranks agree on the largest count), never an empty one
    more = micro_batch_rows(lengths, MicroBatching(rows=1, max_tokens=60), count=len(rows) + 3)
    assert len(more) == len(rows) + 3 and all(more)
    assert sorted(r for part in more for r in part) == list(range(16))


def test_filler_passes_count_nothing(tiny_dir, monkeypatch):
    """A rank with fewer micro-batches than another runs fillers whose loss is zero."""
    import rl_core.training.micro_batches as mb

    batch = spread_batch(3, seed=4)
    (total,) = minibatch_totals([batch], 1)
    plain = policy_of(tiny_dir)
    want_loss = accumulate_minibatch(plain, batch, total, algo(), batching=3)
    monkeypatch.setattr(mb, "largest_over_ranks", lambda count, device, world: count + 4)
    passes = micro_batches(batch, 3, packs=True, world_size=2)
    # the 3 rows are split into 3 micro-batches first, then 2 fillers make 5
    assert [p.filler for p in passes] == [False, False, False, True, True]
    padded = policy_of(tiny_dir)
    loss = accumulate_minibatch(padded, batch, total, algo(), batching=3, world_size=1)
    assert loss["policy_loss"] == pytest.approx(want_loss["policy_loss"], rel=1e-6)
    assert_same_gradients(padded, grads(plain))


def test_a_token_budget_below_the_longest_row_is_refused():
    overrides = ["data.max_prompt_length=32", "rollout.max_new_tokens=16"]
    with pytest.raises(ValueError, match=r"max_tokens_per_micro_batch = 40 cannot hold .* 48"):
        load_config("grpo_arith", overrides=[*overrides, "actor.max_tokens_per_micro_batch=40"])
    cfg = load_config("grpo_arith", overrides=[*overrides, "actor.max_tokens_per_micro_batch=48"])
    assert cfg.actor.max_tokens_per_micro_batch == 48


def test_length_buckets_cover_every_token_once_with_little_padding():
    from rl_core.llm.packed_attention import length_buckets

    lengths = torch.tensor([5, 40, 38, 3, 12, 11, 10, 1, 39])
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = lengths.cumsum(0)
    buckets = length_buckets(cu, waste=0.2)
    covered = torch.cat([b.positions for b in buckets]).sort().values
    assert covered.tolist() == list(range(int(lengths.sum())))
    for b in buckets:
        assert b.valid.sum() >= 0.8 * b.valid.numel() or b.valid.shape[0] == 1
        assert torch.equal(b.index[b.valid], b.positions)
    # rows of one length share one bucket: one attention call for all of them
    same = torch.tensor([0, 12, 24, 36, 48], dtype=torch.int32)
    assert len(length_buckets(same)) == 1


def test_packed_supervised_step_equals_padded(tiny_dir):
    from rl_core.training.sft_update import sft_update

    batch = {k: v for k, v in spread_batch(seed=5).items() if k in FORWARD_INPUT_KEYS}
    (total,) = minibatch_totals([batch], 1)
    results = []
    for batching in (MicroBatching(rows=7), MicroBatching(rows=1, max_tokens=60, packed=True)):
        policy = policy_of(tiny_dir)
        optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)  # keep the gradients' weights
        grads_seen = {}

        def keep(policy=policy, grads_seen=grads_seen):
            grads_seen.update(grads(policy))

        optimizer.register_step_pre_hook(lambda *_: keep())
        metrics = sft_update(policy, optimizer, batch, total, batching, max_grad_norm=None)
        results.append((metrics["train/sft_loss"], grads_seen))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert grads_a and set(grads_a) == set(grads_b)
    for name, g in grads_b.items():
        scale = max(1.0, float(grads_a[name].abs().max()))
        torch.testing.assert_close(g, grads_a[name], atol=2e-6 * scale, rtol=1e-4)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_an_entropy_without_bonus_keeps_no_graph(tiny_dir, packed):
    """With ``entropy_coef`` 0 the entropy is a metric: no ``[tokens, vocabulary]``
    intermediates are kept for the backward pass, and the gradients are the same."""
    policy = policy_of(tiny_dir)
    inputs = {k: v for k, v in spread_batch().items() if k in FORWARD_INPUT_KEYS}
    kept = policy(forward_inputs=inputs, packed=packed)
    metric = policy(forward_inputs=inputs, packed=packed, entropy_grad=False)
    assert kept["entropy"].requires_grad and not metric["entropy"].requires_grad
    torch.testing.assert_close(metric["entropy"], kept["entropy"].detach())
    batch = spread_batch()
    (total,) = minibatch_totals([batch], 1)
    no_bonus = algo().model_copy(update={"entropy_coef": 0.0})
    grads_of = []
    for grad in (True, False):
        policy = policy_of(tiny_dir)
        batching = MicroBatching(rows=7, packed=packed)
        if grad:  # the graph kept, as before: the same gradients
            policy.default_forward = functools.partial(keep_entropy_graph, policy)
            assert policy(forward_inputs=inputs, entropy_grad=False)["entropy"].requires_grad
        metrics = accumulate_minibatch(policy, batch, total, no_bonus, batching)
        assert metrics["entropy"] > 0
        grads_of.append(grads(policy))
    assert_same_gradients_dicts(grads_of[1], grads_of[0])


def keep_entropy_graph(policy, **kwargs):
    """``default_forward`` with the entropy's graph kept whatever the caller asks."""
    return type(policy).default_forward(policy, **{**kwargs, "entropy_grad": True})


def assert_same_gradients_dicts(got, want):
    assert set(got) == set(want)
    for name, g in got.items():
        torch.testing.assert_close(g, want[name], atol=1e-7, rtol=1e-6)
