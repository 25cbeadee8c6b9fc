"""The unbiased pass@k estimator (Codex paper) against values computed by hand."""

from __future__ import annotations

from math import comb

import pytest

from rl_core.pass_at_k import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),  # pass@1 is the share of correct samples
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 1, 4, 1.0),  # k = n: at least one correct
        (4, 0, 4, 0.0),
        (5, 0, 1, 0.0),
        (5, 4, 2, 1.0),  # n - c < k: every draw of two holds a correct one
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_by_hand(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_the_binomial_formula() -> None:
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - comb(n - c, k) / comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


def test_mean_over_prompts_and_bad_input() -> None:
    assert mean_pass_at_k([0, 2, 5], 5, 1) == pytest.approx((0 + 0.4 + 1) / 3)
    assert mean_pass_at_k([0, 2, 5], 5, 5) == pytest.approx(2 / 3)
    for n, c, k in [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)]:
        with pytest.raises(ValueError, match="pass@k needs"):
            pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="no prompts"):
        mean_pass_at_k([], 4, 1)
