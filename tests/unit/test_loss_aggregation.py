"""Loss aggregation modes against hand-computed values (a fully masked row included), and
micro-batches/ranks weighted by the global minibatch totals adding up to the whole loss."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl_core.algorithms import (
    aggregate_loss,
    aggregation_weights,
    count_sequences,
    get_policy_loss,
)
from rl_core.config import load_config
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import (
    FORWARD_KEYS,
    accumulate_minibatch,
    minibatch_totals,
    split_rows,
)
from tests.llm_batches import llm_algorithm, random_llm_batch

MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]

# Row 0: tokens 1, 2 (sum 3); row 1: token 4; row 2: fully masked (not a sequence).
LOSS = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])

HAND_COMPUTED = [
    ("token-mean", None, (1 + 2 + 4) / 3),
    ("seq-mean-token-sum", None, (3 + 4) / 2),
    ("seq-mean-token-mean", None, (3 / 2 + 4 / 1) / 2),
    ("seq-mean-token-sum-norm", None, (3 / 3 + 4 / 3) / 2),  # norm = L = 3
    ("seq-mean-token-sum-norm", 8.0, (3 / 8 + 4 / 8) / 2),
]


@pytest.mark.parametrize(("mode", "norm", "expected"), HAND_COMPUTED)
def test_modes_match_hand_computed_values_and_skip_fully_masked_rows(mode, norm, expected):
    assert aggregate_loss(LOSS, MASK, mode, norm=norm).item() == pytest.approx(expected)
    # the weights give the same number: token total 3, sequence total 2 (not 3 rows)
    weights = aggregation_weights(MASK, mode, 3.0, 2, norm=norm)
    assert (LOSS * weights).sum().item() == pytest.approx(expected)
    # the masked row's losses do not matter at all
    changed = LOSS.clone()
    changed[2] = 1e6
    assert aggregate_loss(changed, MASK, mode, norm=norm).item() == pytest.approx(expected)


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_without_tokens_aggregates_to_zero(mode):
    assert aggregate_loss(LOSS, torch.zeros_like(MASK), mode).item() == 0.0
    assert aggregation_weights(torch.zeros_like(MASK), mode, 0.0, 0).sum().item() == 0.0


def test_count_sequences_skips_fully_masked_rows():
    assert count_sequences(MASK) == 2
    assert count_sequences(torch.zeros(4, 5)) == 0
    assert count_sequences(torch.ones(4, 5, dtype=torch.bool)) == 4


def masked_batch(n: int = 8, seed: int = 0, empty_rows: tuple[int, ...] = (2, 5)) -> dict:
    batch = random_llm_batch(n, seed)
    for row in empty_rows:
        batch["response_mask"][row] = 0
    return batch


def test_minibatch_totals_count_the_rows_the_seq_means_count():
    batch = masked_batch(8, empty_rows=(2, 5))
    # two ranks, two minibatches: minibatch 0 is rows 0,1 (rank 0) + 4,5 (rank 1), minibatch 1
    # is rows 2,3 + 6,7; rows 5 and 2 are empty, so each has 3 sequences
    shards = [{k: v[:4] for k, v in batch.items()}, {k: v[4:] for k, v in batch.items()}]
    totals = minibatch_totals(shards, 2)
    assert [t.seqs for t in totals] == [3, 3]
    assert sum(t.tokens for t in totals) == float(batch["response_mask"].sum())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sizes", [(1,) * 8, (3, 2, 3), (2, 6)])
def test_globally_weighted_micro_batches_add_up_to_the_whole_loss(mode, sizes):
    batch = masked_batch(8, seed=1)
    loss = torch.randn(batch["response_mask"].shape, generator=torch.Generator().manual_seed(3))
    mask = batch["response_mask"]
    (total,) = minibatch_totals([batch], 1)
    whole = aggregate_loss(loss, mask, mode, norm=6.0)
    parts, start = [], 0
    for size in sizes:
        m, part_loss = mask[start : start + size], loss[start : start + size]
        parts.append(
            (part_loss * aggregation_weights(m, mode, total.tokens, total.seqs, 6.0)).sum()
        )
        start += size
    torch.testing.assert_close(torch.stack(parts).sum(), whole)


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    path = create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)
    torch.manual_seed(0)
    return CausalLMPolicy(
        AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    ).train()


@pytest.mark.parametrize("mode", MODES)
def test_trainer_policy_loss_over_micro_batches_equals_the_whole_minibatch_loss(tiny_policy, mode):
    """accumulate_minibatch's micro-batch losses sum to the PPO loss of the whole minibatch."""
    batch = masked_batch(6, seed=2, empty_rows=(1,))
    algo = llm_algorithm(load_config(overrides=["algorithm.adv_type=gae"]).algorithm).model_copy(
        update={"loss_agg_mode": mode}
    )
    (total,) = minibatch_totals([batch], 1)
    tiny_policy.zero_grad(set_to_none=True)
    shares = accumulate_minibatch(tiny_policy, batch, total, algo, batching=2, norm=5.0)
    tiny_policy.zero_grad(set_to_none=True)
    with torch.no_grad():
        out = tiny_policy(
            forward_type="default_forward",
            forward_inputs={k: batch[k] for k in FORWARD_KEYS},
            compute_values=False,
            compute_entropy=False,
        )
        whole, _ = get_policy_loss("ppo")(
            logprobs=out["logprobs"],
            old_logprobs=batch["old_logprobs"],
            advantages=batch["advantages"],
            clip_ratio_low=algo.clip_ratio_low,
            clip_ratio_high=algo.clip_ratio_high,
            loss_mask=batch["response_mask"],
            loss_agg_mode=mode,
            loss_agg_norm=5.0,
        )
    assert len(split_rows(batch, 3)) == 3  # really three micro-batches
    assert shares["policy_loss"] == pytest.approx(float(whole), rel=1e-5, abs=1e-6)
