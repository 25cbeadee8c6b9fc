"""Rows carry their prompt group (``group_index``): the group-relative estimators and dynamic
sampling group by it, whatever the order of the rows, and refuse a batch without a fitting one."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kinds.reasoning.pipelined_generation import batch_groups
from kinds.reasoning.responses import ResponseBatch
from rl_core.algorithms import GroupIndexError, consecutive_groups, get_advantage
from rl_core.algorithms.dapo import fill_with_informative_groups, informative_groups
from rl_core.training.llm_advantage import compute_llm_advantages
from rl_core.training.llm_update import rank_rows, split_rows

GROUP_RELATIVE = ["grpo", "dr_grpo", "rloo", "reinforce_plus_plus_baseline"]
K, G, L = 4, 5, 6


def algo(adv_type, normalize=True):
    return SimpleNamespace(
        adv_type=adv_type,
        group_size=K,
        gamma=1.0,
        gae_lambda=0.95,
        kl_estimator="k3",
        kl_coef=0.0,
        kl_in_reward=False,
        normalize_advantages=normalize,
    )


def batch(seed=0, exact=True):
    """``G`` groups of ``K`` rows in rollout order. ``exact``: rewards in {0..3}, whose group
    sums are exact in float32, so any summation order gives the same bits."""
    g = torch.Generator().manual_seed(seed)
    if exact:
        scores = torch.randint(0, 4, (G * K,), generator=g).float()
    else:
        scores = torch.randn(G * K, generator=g)
    lengths = torch.randint(1, L + 1, (G * K,), generator=g)
    mask = (torch.arange(L)[None, :] < lengths[:, None]).long()
    return (
        scores,
        mask,
        -torch.rand(G * K, L, generator=g),
        torch.as_tensor(consecutive_groups(G, K)),
    )


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("adv_type", GROUP_RELATIVE)
def test_advantages_follow_their_rows_when_the_batch_is_shuffled(adv_type, normalize):
    """Bit for bit; with ``normalize_advantages`` the batch-wide whitening sums the tokens in
    row order, so its rounding may differ in the last bit."""
    scores, mask, old, groups = batch()
    base = compute_llm_advantages(scores, mask, old, algo(adv_type, normalize), group_index=groups)
    for seed in range(3):
        perm = torch.randperm(G * K, generator=torch.Generator().manual_seed(seed))
        shuffled = compute_llm_advantages(
            scores[perm], mask[perm], old[perm], algo(adv_type, normalize), group_index=groups[perm]
        )
        assert torch.equal(shuffled.returns, base.returns[perm])
        if normalize:
            torch.testing.assert_close(
                shuffled.advantages, base.advantages[perm], rtol=1e-6, atol=1e-6
            )
        else:
            assert torch.equal(shuffled.advantages, base.advantages[perm])
    # a batch in group order whose groups are numbered apart (as a joined batch is) is the same
    assert torch.equal(
        compute_llm_advantages(
            scores, mask, old, algo(adv_type, normalize), group_index=groups * 3 + 11
        ).advantages,
        base.advantages,
    )


@pytest.mark.parametrize("adv_type", ["grpo", "dr_grpo", "rloo"])
def test_shuffled_rows_with_any_rewards_and_group_numbers(adv_type):
    """Float rewards (equal up to the rounding of the group sums), group numbers not 0..G-1."""
    scores, _, _, groups = batch(seed=1, exact=False)
    estimator = get_advantage(adv_type)
    base, _ = estimator(rewards=scores, group_size=K, group_index=groups)
    perm = torch.randperm(G * K, generator=torch.Generator().manual_seed(7))
    renamed = (groups * 37 - 5)[perm]  # any integers name the groups
    shuffled, _ = estimator(rewards=scores[perm], group_size=K, group_index=renamed)
    torch.testing.assert_close(shuffled, base[perm], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("adv_type", GROUP_RELATIVE)
def test_a_batch_without_group_index_is_refused(adv_type):
    scores, mask, old, _ = batch()
    with pytest.raises(GroupIndexError, match=rf"{adv_type}.*needs group_index"):
        compute_llm_advantages(scores, mask, old, algo(adv_type))


@pytest.mark.parametrize("adv_type", GROUP_RELATIVE)
def test_a_group_of_the_wrong_size_is_refused(adv_type):
    scores, mask, old, groups = batch()
    groups = groups.clone()
    groups[K] = 0  # group 0 gets a fifth row, group 1 keeps three
    with pytest.raises(GroupIndexError, match=r"group_size=4 rows, but group 0 has 5 \(2 of 5"):
        compute_llm_advantages(scores, mask, old, algo(adv_type), group_index=groups)


@pytest.mark.parametrize(
    ("group_index", "match"),
    [
        (list(range(G * K - 1)), r"one entry per row \(20\), got shape \(19,\)"),
        (np.zeros((G * K, 1), dtype=np.int64), r"one entry per row"),
        (np.zeros(G * K, dtype=np.float32), r"must hold integers"),
    ],
)
def test_a_group_index_that_does_not_fit_the_rows_is_refused(group_index, match):
    scores, *_ = batch()
    with pytest.raises(GroupIndexError, match=match):
        get_advantage("grpo")(rewards=scores, group_size=K, group_index=group_index)


def test_estimators_without_groups_ignore_the_group_index():
    scores, mask, old, groups = batch()
    plain = compute_llm_advantages(scores, mask, old, algo("reinforce_plus_plus"))
    indexed = compute_llm_advantages(
        scores, mask, old, algo("reinforce_plus_plus"), group_index=groups
    )
    assert torch.equal(plain.advantages, indexed.advantages)


def test_dynamic_sampling_keeps_whole_groups_wherever_their_rows_are():
    scores = [1.0, 0, 1, 1, 1, 0]
    groups = [0, 1, 0, 2, 1, 2]  # group 0 scored 1, 1; group 1 0, 1; group 2 1, 0
    rows = informative_groups(torch.tensor(scores), groups, group_size=2)
    assert rows.tolist() == [False, True, False, True, True, True]
    picks, rounds = fill_with_informative_groups(
        lambda i: "round", lambda b: scores, lambda b: groups, 2, 4, True, 1
    )
    assert (picks, rounds) == ([("round", [1, 4]), ("round", [3, 5])], 1)
    with pytest.raises(GroupIndexError, match="dynamic sampling needs groups of group_size=2"):
        informative_groups(torch.zeros(3), [0, 0, 0], group_size=2)


def test_joined_batches_number_each_picked_group_anew():
    def round_batch(tag, groups):
        n = len(groups)
        return ResponseBatch(
            samples=[None] * n,
            prompt_ids=[[tag, r] for r in range(n)],
            response_ids=[[r] for r in range(n)],
            rollout_logprobs=[[0.0]] * n,
            finished=[True] * n,
            group_index=groups,
        )

    first, second = round_batch(0, [0, 0, 1, 1]), round_batch(1, [0, 1, 0, 1])
    joined = ResponseBatch.joined([(first, [2, 3]), (second, [1, 3]), (first, [0, 1])])
    assert [p[0] for p in joined.prompt_ids] == [0, 0, 1, 1, 0, 0]
    assert joined.group_index == [0, 0, 1, 1, 2, 2]
    bare = round_batch(2, [0, 0])
    bare.group_index = []
    with pytest.raises(ValueError, match="needs its prompt group"):
        joined.extend(bare, [0])


def test_the_group_index_follows_rows_through_shuffling_and_minibatch_splits():
    n = G * K
    arrays = {"group_index": consecutive_groups(G, K), "tag": np.arange(n) // K}
    order = np.random.default_rng(3).permutation(n)
    arrays = {k: v[order] for k, v in arrays.items()}
    for shard_rows in rank_rows(n, num_minibatches=2, world_size=2):
        shard = {k: torch.from_numpy(v[shard_rows]) for k, v in arrays.items()}
        for minibatch in split_rows(shard, 2):
            assert torch.equal(minibatch["group_index"], minibatch["tag"])


def test_async_batches_read_the_group_index_of_their_rows():
    metas = [{"rows": [7, 7, 3], "groups": [0, 0, 1]}, {"rows": [3], "groups": [1]}]
    assert batch_groups(metas, 2) == [0, 0, 1, 1]
    # a batch checkpointed before rows carried their group was laid out in group order
    assert batch_groups([{"rows": [7, 7, 3]}, {"rows": [3]}], 2) == [0, 0, 1, 1]
