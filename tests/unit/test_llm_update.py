"""The LLM update: micro-batching and data-parallel shards reproduce the whole-batch loss."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl_core.algorithms import aggregate_loss, aggregation_weights
from rl_core.config import load_config
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import (
    accumulate_minibatch,
    llm_update,
    minibatch_totals,
    split_rows,
)
from tests.llm_batches import llm_actor, llm_algorithm, random_llm_batch

MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def policy_of(tiny_dir):
    torch.manual_seed(0)
    return CausalLMPolicy(
        AutoModelForCausalLM.from_pretrained(tiny_dir), AutoTokenizer.from_pretrained(tiny_dir)
    ).train()


def make_batch(n=6, seed=0):
    return random_llm_batch(n, seed)


def algo(mode="token-mean", **kw):
    cfg = llm_algorithm(load_config(overrides=["algorithm.adv_type=gae"]).algorithm)
    return cfg.model_copy(
        update={"loss_agg_mode": mode, "kl_coef": 0.1, "entropy_coef": 0.01, **kw}
    )


def grads(policy):
    return {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("mode", MODES)
def test_weights_reproduce_each_aggregation(mode):
    loss = torch.rand(4, 5)
    mask = (torch.rand(4, 5) > 0.3).long()
    mask[:, 0] = 1
    w = aggregation_weights(mask, mode, float(mask.sum()), 4, norm=7.0)
    expected = aggregate_loss(loss, mask, mode, norm=7.0)
    torch.testing.assert_close((loss * w).sum(), expected)


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_and_two_ranks_match_one_pass(tiny_dir, mode):
    batch = make_batch()
    (total,) = minibatch_totals([batch], 1)
    reference = policy_of(tiny_dir)
    accumulate_minibatch(reference, batch, total, algo(mode), batching=6, norm=8.0)
    want = grads(reference)

    micro = policy_of(tiny_dir)
    accumulate_minibatch(micro, batch, total, algo(mode), batching=2, norm=8.0)
    for name, g in grads(micro).items():
        torch.testing.assert_close(g, want[name], atol=1e-6, rtol=1e-5)

    # Two data-parallel ranks with uneven shards: FSDP averages their gradients.
    shards = [{k: v[:2] for k, v in batch.items()}, {k: v[2:] for k, v in batch.items()}]
    (total2,) = minibatch_totals(shards, 1)
    assert total2 == total
    ranks = []
    for shard in shards:
        rank_policy = policy_of(tiny_dir)
        accumulate_minibatch(rank_policy, shard, total2, algo(mode), 1, world_size=2, norm=8.0)
        ranks.append(grads(rank_policy))
    for name, g in want.items():
        torch.testing.assert_close((ranks[0][name] + ranks[1][name]) / 2, g, atol=1e-6, rtol=1e-5)


def test_update_steps_the_optimizer_per_minibatch_and_reports_metrics(tiny_dir):
    policy = policy_of(tiny_dir)
    before = copy.deepcopy(policy.state_dict())
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    batch = make_batch(8)
    actor = llm_actor(load_config().actor).model_copy(
        update={"update_epochs": 2, "micro_batch_size": 3}
    )
    totals = minibatch_totals([batch], 2)
    metrics = llm_update(policy, opt, batch, totals, algo(), actor)
    assert metrics["train/optimizer_steps"] == 4.0
    for key in (
        "train/policy_loss",
        "train/entropy",
        "train/kl_loss",
        "train/grad_norm",
        "train/clipfrac",
    ):
        assert key in metrics
    assert any(not torch.equal(before[k], v) for k, v in policy.state_dict().items())


def test_split_rows_covers_every_row_once():
    batch = {"x": torch.arange(7)}
    parts = split_rows(batch, 3)
    assert [p["x"].tolist() for p in parts] == [[0, 1], [2, 3, 4], [5, 6]]


def test_rank_rows_keep_minibatches_whatever_the_world_size():
    from rl_core.training.llm_update import rank_rows

    assert rank_rows(8, 2, 1) == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert rank_rows(8, 2, 2) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    # minibatch k of every rank together is chunk k of the batch
    ranks = rank_rows(12, 3, 2)
    for k in range(3):
        rows = sorted(r for shard in ranks for r in shard[2 * k : 2 * k + 2])
        assert rows == list(range(4 * k, 4 * k + 4))
