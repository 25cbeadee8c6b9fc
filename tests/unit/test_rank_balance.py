"""Rows split across data-parallel ranks: even row counts, about equal tokens."""

from __future__ import annotations

import numpy as np

from rl_core.training.llm_update import rank_rows
from rl_core.training.rank_balance import balanced_split, imbalance


def test_balanced_split_evens_tokens_with_even_row_counts():
    rng = np.random.default_rng(0)
    lengths = rng.integers(32, 513, size=64).tolist()
    groups = balanced_split(lengths, 4)
    assert [len(g) for g in groups] == [16, 16, 16, 16]
    assert sorted(i for g in groups for i in g) == list(range(64))
    plain = [list(range(16 * r, 16 * r + 16)) for r in range(4)]
    assert imbalance(lengths, groups) < 1.01 < imbalance(lengths, plain)


def test_balanced_split_keeps_array_split_sizes():
    groups = balanced_split([5, 1, 9, 3, 7], 2)
    assert [len(g) for g in groups] == [3, 2]
    # longest first to the lighter open part: 9 → 0, 7 → 1, 5 → 1 (full), 3 → 0, 1 → 0
    assert groups == [[1, 2, 3], [0, 4]]


def test_rank_rows_balance_within_each_minibatch():
    lengths = [1, 100, 2, 3, 50, 60, 1, 1]
    plain = rank_rows(8, 2, 2)
    balanced = rank_rows(8, 2, 2, lengths)
    assert plain == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert balanced == [[0, 1, 5, 7], [2, 3, 4, 6]]
    # minibatch k holds the same rows either way: only which rank computes them moves
    for k in range(2):
        assert sorted(plain[0][2 * k : 2 * k + 2] + plain[1][2 * k : 2 * k + 2]) == sorted(
            balanced[0][2 * k : 2 * k + 2] + balanced[1][2 * k : 2 * k + 2]
        )
