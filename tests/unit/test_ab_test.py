"""A/B comparison of served versions by acceptance rate."""

from __future__ import annotations

import pytest

from rl_core.online.ab_test import ABComparison, ShareSplit, VersionFeedback


def test_the_candidate_wins_by_more_than_the_margin_with_enough_feedback() -> None:
    main, better = VersionFeedback(3, 10, 40), VersionFeedback(5, 30, 40)
    comparison = ABComparison(main, better, min_improvement=0.1, min_judged=40)
    assert comparison.enough_feedback and comparison.wins
    assert comparison.z == pytest.approx(4.47, abs=0.01)
    assert "candidate v5 0.750 (30/40) against main v3 0.250 (10/40)" in comparison.summary()
    assert "| candidate | 5 | 30 | 40 | 0.750 |" in comparison.markdown()


@pytest.mark.parametrize(
    ("candidate", "margin", "min_judged", "why"),
    [
        (VersionFeedback(5, 10, 40), 0.0, 1, "does not win"),  # equal rates
        (VersionFeedback(5, 12, 40), 0.1, 1, "does not win"),  # 0.300: within the margin
        (VersionFeedback(5, 3, 3), 0.0, 30, "too little feedback"),
        (None, 0.0, 1, "no candidate is served"),
    ],
)
def test_the_candidate_does_not_win(
    candidate: VersionFeedback | None, margin: float, min_judged: int, why: str
) -> None:
    comparison = ABComparison(VersionFeedback(3, 10, 40), candidate, margin, min_judged)
    assert not comparison.wins
    assert why in comparison.summary()
    if candidate is None or candidate.judged < min_judged:
        assert comparison.z is None


def test_a_version_nobody_judged_has_no_rate() -> None:
    assert VersionFeedback(0, 0, 0).rate is None
    assert "no feedback" in ABComparison(VersionFeedback(0, 0, 0), None).summary()


@pytest.mark.parametrize("share", [0.5, 0.1, 0.3, 2 / 3, 0.9])
def test_a_share_split_gives_the_candidate_exactly_its_share_of_every_prefix(share) -> None:
    split = ShareSplit(share)
    picks = [split.next_is_candidate() for _ in range(200)]
    for n in range(1, 201):
        assert sum(picks[:n]) == int(n * share + 1e-9), (n, share)


def test_a_half_split_alternates_and_bad_shares_are_refused() -> None:
    split = ShareSplit(0.5)
    assert [split.next_is_candidate() for _ in range(6)] == [False, True] * 3
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match=r"A/B share must be in \(0, 1\)"):
            ShareSplit(bad)
