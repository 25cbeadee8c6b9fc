"""Publishing versions to an endpoint's weights file and promoting the A/B candidate."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kinds.online.deployment import Weights, read_weights
from kinds.online.served_versions import (
    NoCandidateError,
    ab_comparison,
    ab_metrics,
    promote_candidate,
    publish_version,
    served_dirs,
)
from kinds.online.store import FeedbackStore
from rl_core.online import Feedback
from tests.unit.test_feedback_store import rid, served


def test_a_new_version_replaces_main_without_a_gate(tmp_path: Path) -> None:
    path = tmp_path / "current.json"
    publish_version(path, 0, "/m/v0", None)
    assert publish_version(path, 1, "/m/v1", None) == Weights(1, "/m/v1")
    assert read_weights(path) == Weights(1, "/m/v1")


def test_under_a_gate_new_versions_are_candidates_until_promoted(tmp_path: Path) -> None:
    path = tmp_path / "current.json"
    assert publish_version(path, 0, "/m/v0", 0.5) == Weights(0, "/m/v0")  # nothing served yet
    publish_version(path, 1, "/m/v1", 0.5)
    publish_version(path, 2, "/m/v2", 0.5)  # replaces the older candidate
    assert read_weights(path) == Weights(0, "/m/v0", 2, "/m/v2", 0.5)
    assert served_dirs(read_weights(path)) == {Path("/m/v0"), Path("/m/v2")}
    with pytest.raises(NoCandidateError, match="now version 2, not 1"):
        promote_candidate(path, expected=1)  # decided about an older candidate
    assert promote_candidate(path, expected=2) == Weights(2, "/m/v2")
    assert read_weights(path) == Weights(2, "/m/v2")
    with pytest.raises(NoCandidateError, match="no candidate"):
        promote_candidate(path)


def test_concurrent_publishers_do_not_lose_an_update(tmp_path: Path) -> None:
    path = tmp_path / "current.json"
    publish_version(path, 0, "/m/v0", 0.5)
    publish_version(path, 1, "/m/v1", 0.5)
    # the promotion and a new candidate at the same time: either order leaves a coherent file
    threads = [
        threading.Thread(target=lambda: promote_candidate(path, expected=1)),
        threading.Thread(target=lambda: publish_version(path, 2, "/m/v2", 0.5)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = read_weights(path)
    # promote first: main v1, candidate v2; publish first: the promotion refuses (main v0)
    assert final in (Weights(1, "/m/v1", 2, "/m/v2", 0.5), Weights(0, "/m/v0", 2, "/m/v2", 0.5))


def test_acceptance_per_served_version_from_the_store(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    path = tmp_path / "current.json"
    publish_version(path, 0, "/m/v0", 0.5)
    publish_version(path, 4, "/m/v4", 0.5)
    verdicts = {0: [True, False, False, False], 4: [True, True, True, False]}
    i = 0
    for version, answers in verdicts.items():
        for accepted in answers:
            served(store, i, version=version, variant="main" if version == 0 else "candidate")
            store.record_feedback(Feedback(rid(i), accepted=accepted))
            i += 1
    comparison = ab_comparison(store, path, min_improvement=0.25, min_judged=4)
    assert comparison.wins and comparison.main.rate == 0.25 and comparison.candidate.rate == 0.75
    assert ab_metrics(comparison) == {
        "online/ab_main_version": 0.0,
        "online/ab_main_judged": 4.0,
        "online/ab_main_acceptance": 0.25,
        "online/ab_candidate_version": 4.0,
        "online/ab_candidate_judged": 4.0,
        "online/ab_candidate_acceptance": 0.75,
    }
    assert ab_comparison(store, tmp_path / "missing.json") is None
    store.close()
