"""The loss mask: tool output inside a response is context, never a training target."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from kinds.reasoning.responses import ResponseBatch
from kinds.reasoning.sections import ReasoningAlgorithmConfig
from rl_core.agents.trajectory import Trajectory
from rl_core.algorithms import get_advantage, importance_weights
from rl_core.algorithms.aggregation import LOSS_AGG_MODES
from rl_core.algorithms.registry import ADVANTAGES, POLICY_LOSSES
from rl_core.llm import pad_left, pad_loss_masks, pad_right
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_advantage import compute_llm_advantages, outcome_token_rewards
from rl_core.training.llm_update import (
    MinibatchTotals,
    accumulate_minibatch,
    minibatch_totals,
)
from rl_core.training.loss_mask import check_loss_mask, loss_mask_of
from rl_core.training.sft_update import sft_update
from tests.llm_batches import random_llm_batch

#: The built-in policy losses (tests elsewhere register throwaway ones).
LOSSES = [n for n in POLICY_LOSSES.names() if POLICY_LOSSES.get(n).__module__.startswith("rl_")]
MODES = LOSS_AGG_MODES.names()
#: The built-in estimators of the reasoning path (``gae`` is the embodied, time-major one).
LLM_ESTIMATORS = [
    n
    for n in ADVANTAGES.names()
    if n not in ("gae", "episode_grpo") and ADVANTAGES.get(n).__module__.startswith("rl_")
]
#: Keys of per-token targets: none of them may matter where the loss mask is 0.
TARGETS = (
    "advantages",
    "old_logprobs",
    "ref_logprobs",
    "rollout_logprobs",
    "old_values",
    "returns",
)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)
    model = AutoModelForCausalLM.from_pretrained(path)
    return CausalLMPolicy(model, AutoTokenizer.from_pretrained(path), value_head=True).train()


def algo(loss="ppo", mode="token-mean", **kw):
    fields = {"loss_type": loss, "loss_agg_mode": mode, "kl_coef": 0.1, "entropy_coef": 0.01}
    return ReasoningAlgorithmConfig(**{**fields, **kw})


def multi_turn_batch(n=4, seed=0, vocab=260):
    """``n`` agent trajectories: model, tool, model tokens; odd rows end with a tool turn."""
    g = torch.Generator().manual_seed(seed)

    def ids(low, high):
        return torch.randint(
            4, vocab, (int(torch.randint(low, high, (1,), generator=g)),), generator=g
        ).tolist()

    rows = []
    for i in range(n):
        traj = Trajectory(prompt_ids=ids(2, 5))
        for turn in range(2):
            tokens = ids(1, 4)
            traj.add_model_tokens(tokens, (-torch.rand(len(tokens), generator=g)).tolist(), 0)
            if turn == 0 or i % 2:
                traj.add_tool_tokens(ids(1, 4))
        rows.append(traj.to_row())
    responses = [r["response_ids"] for r in rows]
    p_ids, p_mask = pad_left([r["prompt_ids"] for r in rows], 0)
    r_ids, r_mask = pad_right(responses, 0)
    loss_mask = pad_loss_masks([r["loss_mask"] for r in rows], responses)
    rollout = torch.zeros(r_ids.shape)
    for i, r in enumerate(rows):
        rollout[i, : len(r["logprobs"])] = torch.tensor(r["logprobs"])
    shape = r_ids.shape
    return {
        "prompt_ids": p_ids,
        "prompt_mask": p_mask,
        "response_ids": r_ids,
        "response_mask": r_mask,
        "loss_mask": loss_mask,
        "old_logprobs": rollout + 0.05 * torch.randn(shape, generator=g) * loss_mask,
        "advantages": torch.randn(shape, generator=g),
        "ref_logprobs": -torch.rand(shape, generator=g) * 3,
        "rollout_logprobs": rollout,  # 0.0 on tool tokens, as a trajectory records them
        "old_values": torch.randn(shape, generator=g),
        "returns": torch.randn(shape, generator=g),
        "group_index": torch.arange(n) // 2,
    }


def perturbed(batch, seed=1):
    """``batch`` with every per-token target changed where the loss mask is 0."""
    g = torch.Generator().manual_seed(seed)
    off = loss_mask_of(batch) == 0
    out = dict(batch)
    for key in TARGETS:
        noise = (
            -torch.rand(off.shape, generator=g) * 3
            if "logprobs" in key
            else (torch.randn(off.shape, generator=g) * 5)
        )
        out[key] = torch.where(off, noise, batch[key])
    return out


def run(policy, batch, cfg):
    """Metrics and gradients of one minibatch (no optimizer step)."""
    policy.zero_grad(set_to_none=True)
    (totals,) = minibatch_totals([batch], 1)
    metrics = accumulate_minibatch(policy, batch, totals, cfg, batching=2, norm=9.0)
    grads = {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}
    policy.zero_grad(set_to_none=True)
    return metrics, grads


def assert_same(a, b):
    (m1, g1), (m2, g2) = a, b
    assert m1 == m2
    assert g1.keys() == g2.keys()
    for name, grad in g1.items():
        assert torch.equal(grad, g2[name]), name


def test_the_batch_has_tool_tokens_inside_and_at_the_end():
    batch = multi_turn_batch()
    check_loss_mask(batch)
    tool = (batch["response_mask"] == 1) & (batch["loss_mask"] == 0)
    assert tool.any(dim=1).all()
    last = batch["response_mask"].sum(dim=1) - 1
    assert not bool(batch["loss_mask"][1, last[1]])  # row 1 ends with a tool turn
    assert torch.equal(batch["rollout_logprobs"][tool], torch.zeros(int(tool.sum())))


@pytest.mark.parametrize(("correction", "level"), [("none", "token"), ("mis", "sequence")])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loss", LOSSES)
def test_targets_at_tool_tokens_change_no_loss_and_no_gradient(
    policy, loss, mode, correction, level
):
    cfg = algo(loss, mode, is_correction=correction, is_level=level, is_threshold=3.0)
    assert cfg.kl_coef > 0 and cfg.entropy_coef > 0 and not cfg.kl_in_reward
    batch = multi_turn_batch()
    base = run(policy, batch, cfg)
    assert {"policy_loss", "entropy", "kl_loss", "value_loss"} <= base[0].keys()
    assert_same(base, run(policy, perturbed(batch), cfg))
    # the perturbation does move the loss when the tool tokens count (sanity check)
    as_model = {**batch, "loss_mask": batch["response_mask"].float()}
    moved = run(policy, {**perturbed(batch), "loss_mask": as_model["loss_mask"]}, cfg)[0]
    assert moved["policy_loss"] != run(policy, as_model, cfg)[0]["policy_loss"]


def test_tool_tokens_are_still_context(policy):
    batch = multi_turn_batch()
    tool = torch.nonzero((batch["response_mask"] == 1) & (batch["loss_mask"] == 0))
    row, col = (int(x) for x in tool[0])
    later = (batch["loss_mask"][row] == 1) & (torch.arange(batch["loss_mask"].shape[1]) > col)
    assert later.any()
    changed = {**batch, "response_ids": batch["response_ids"].clone()}
    changed["response_ids"][row, col] = (int(batch["response_ids"][row, col]) + 7) % 256 + 4
    keys = ("prompt_ids", "prompt_mask", "response_ids", "response_mask")
    with torch.no_grad():
        before = policy(forward_inputs={k: batch[k] for k in keys})["logprobs"][row]
        after = policy(forward_inputs={k: changed[k] for k in keys})["logprobs"][row]
    assert not torch.equal(before[later], after[later])
    assert (
        run(policy, batch, algo())[0]["policy_loss"]
        != run(policy, changed, algo())[0]["policy_loss"]
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loss", LOSSES)
def test_no_loss_mask_is_the_response_mask_bit_for_bit(policy, loss, mode):
    batch = random_llm_batch(6, seed=3)
    batch["old_values"], batch["returns"] = torch.randn(2, *batch["advantages"].shape)
    cfg = algo(loss, mode, is_correction="tis", is_level="sequence")
    explicit = {**batch, "loss_mask": batch["response_mask"].float()}
    assert_same(run(policy, batch, cfg), run(policy, explicit, cfg))


@pytest.mark.parametrize("adv_type", LLM_ESTIMATORS)
def test_advantages_without_loss_mask_are_unchanged(adv_type):
    batch = random_llm_batch(6, seed=4)
    mask, old = batch["response_mask"], batch["old_logprobs"]
    scores, values = torch.randn(6), torch.randn(mask.shape)
    cfg = algo(adv_type=adv_type, group_size=2, kl_in_reward=True, normalize_advantages=True)
    kw = {
        "values": values,
        "ref_logprobs": batch["ref_logprobs"],
        "group_index": [0, 0, 1, 1, 2, 2],
    }
    plain = compute_llm_advantages(scores, mask, old, cfg, **kw)
    explicit = compute_llm_advantages(scores, mask, old, cfg, **kw, loss_mask=mask.float())
    assert torch.equal(plain.advantages, explicit.advantages)
    assert torch.equal(plain.returns, explicit.returns)
    assert plain.metrics == explicit.metrics


@pytest.mark.parametrize("adv_type", ["grpo", "reinforce_plus_plus", "token_gae"])
def test_advantages_of_tool_tokens_are_zero_and_ignored(adv_type):
    batch = multi_turn_batch(seed=5)
    lm, mask = batch["loss_mask"], batch["response_mask"]
    cfg = algo(adv_type=adv_type, group_size=2, kl_in_reward=True, normalize_advantages=True)

    def advantages(b):
        return compute_llm_advantages(
            torch.tensor([1.0, 0.0, 0.5, 2.0]),
            mask,
            b["old_logprobs"],
            cfg,
            b["old_values"],
            b["ref_logprobs"],
            group_index=[0, 0, 1, 1],
            loss_mask=lm,
        )

    out = advantages(batch)
    assert torch.equal(out.advantages[lm == 0], torch.zeros(int((lm == 0).sum())))
    assert out.advantages[lm == 1].abs().sum() > 0
    again = advantages(perturbed(batch))
    assert torch.equal(out.advantages, again.advantages) and out.metrics == again.metrics


def test_outcome_reward_goes_on_the_last_model_token():
    lm = torch.tensor([[1.0, 1, 0, 0, 1, 0, 0], [1, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]])
    rewards = outcome_token_rewards(torch.tensor([2.0, 3.0, 4.0]), lm)
    expected = torch.zeros_like(lm)
    expected[0, 4], expected[1, 5] = 2.0, 3.0
    assert torch.equal(rewards, expected)


def compact(x, mask):
    """Each row's masked-in values packed left (the reference the gapped rows must match)."""
    out = torch.zeros_like(x)
    for i in range(x.shape[0]):
        kept = x[i][mask[i] == 1]
        out[i, : kept.numel()] = kept
    return out


@pytest.mark.parametrize("adv_type", ["token_gae", "reinforce_plus_plus"])
def test_token_level_estimators_skip_tool_tokens(adv_type):
    lm = torch.tensor([[1.0, 1, 0, 0, 1, 0], [1, 0, 1, 1, 0, 0]])
    rewards = torch.tensor([[0.1, 0.0, 5.0, 5.0, 1.0, 0.0], [0.0, 9.0, -0.2, 2.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.8, 9.0, -9.0, 0.3, 4.0], [0.2, 7.0, 0.1, 0.4, 3.0, 3.0]])
    fn = get_advantage(adv_type)
    kw = {"gamma": 0.9, "gae_lambda": 0.7}
    adv, ret = fn(token_rewards=rewards, values=values, response_mask=lm, **kw)
    want_adv, want_ret = fn(
        token_rewards=compact(rewards * lm, lm),
        values=compact(values, lm),
        response_mask=compact(lm, lm),
        **kw,
    )
    for got, want in ((adv, want_adv), (ret, want_ret)):
        assert torch.equal(compact(got, lm), want)
        assert torch.equal(got[lm == 0], torch.zeros(int((lm == 0).sum())))


def test_importance_statistics_ignore_tool_tokens():
    batch = multi_turn_batch(seed=6)
    lm, old = batch["loss_mask"], batch["old_logprobs"]
    for level in ("token", "sequence"):
        weights, stats = importance_weights(old, batch["rollout_logprobs"], lm, "tis", level, 1.5)
        other = perturbed(batch)
        weights2, stats2 = importance_weights(old, other["rollout_logprobs"], lm, "tis", level, 1.5)
        assert torch.equal(weights, weights2) and stats == stats2
    # a sequence's ratio is the product over its model tokens only
    log_ratio = ((old - batch["rollout_logprobs"]) * lm).sum(dim=1)
    expected = torch.exp(log_ratio).clamp(max=1.5)[:, None] * lm
    torch.testing.assert_close(weights, expected)
    assert stats["is_log_ratio_abs_mean"] == pytest.approx(
        float((log_ratio.abs()[:, None] * lm).sum() / lm.sum())
    )


def test_minibatch_totals_count_model_tokens():
    batch = multi_turn_batch(seed=7)
    batch["loss_mask"][3] = 0  # a row the model produced nothing of
    (totals,) = minibatch_totals([batch], 1)
    assert totals == MinibatchTotals(float(batch["loss_mask"].sum()), 3)
    del batch["loss_mask"]
    (totals,) = minibatch_totals([batch], 1)
    assert totals == MinibatchTotals(float(batch["response_mask"].sum()), 4)


def test_sft_trains_on_model_tokens_only(policy):
    batch = multi_turn_batch(seed=8)
    lm = batch["loss_mask"]
    keys = ("prompt_ids", "prompt_mask", "response_ids", "response_mask")
    with torch.no_grad():
        logprobs = policy(forward_inputs={k: batch[k] for k in keys})["logprobs"]
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    totals = MinibatchTotals(float(lm.sum()), 4)
    shard = {k: batch[k] for k in (*keys, "loss_mask")}
    out = sft_update(policy, optimizer, shard, totals, batching=2, max_grad_norm=None)
    expected = float(-(logprobs * lm).sum() / lm.sum())
    assert out["train/sft_loss"] == pytest.approx(expected, rel=1e-5)
    unmasked = float(-(logprobs * batch["response_mask"]).sum() / batch["response_mask"].sum())
    assert out["train/sft_loss"] != pytest.approx(unmasked, rel=1e-3)


def test_padding_and_checks():
    masks = pad_loss_masks([[1, 0, 1], [1]], [[5, 6, 7], [8]], length=4)
    assert torch.equal(masks, torch.tensor([[1.0, 0, 1, 0], [1, 0, 0, 0]]))
    assert torch.equal(pad_loss_masks(None, [[5, 6], [7]]), torch.tensor([[1.0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="2 values for 3 tokens"):
        pad_loss_masks([[1, 0], [1]], [[5, 6, 7], [8]])
    response = torch.tensor([[1, 1, 0]])
    for bad, why in (
        ([[1.0, 1, 1]], "padding"),
        ([[1.0, 0.5, 0]], "0 .* or 1"),
        ([[1.0]], "shape"),
    ):
        with pytest.raises(ValueError, match=why):
            check_loss_mask({"response_mask": response, "loss_mask": torch.tensor(bad)})


def test_response_batches_join_with_and_without_loss_masks():
    def batch(responses, masks):
        n = len(responses)
        return ResponseBatch(
            samples=[None] * n,
            prompt_ids=[[1]] * n,
            response_ids=responses,
            rollout_logprobs=[[0.0] * len(r) for r in responses],
            finished=[True] * n,
            group_index=[0] * n,
            loss_masks=masks,
        )

    joined = ResponseBatch.joined(
        [(batch([[5, 6]], []), [0]), (batch([[7, 8, 9], [4]], [[1, 0, 1], [1]]), [0, 1])]
    )
    assert joined.loss_masks == [[1, 1], [1, 0, 1], [1]]
    plain = ResponseBatch.joined([(batch([[5, 6]], []), [0])])
    assert plain.loss_masks == []
    with pytest.raises(ValueError, match="loss masks"):
        ResponseBatch().extend(batch([[5], [6]], [[1]]), [0])
