"""The store of served generations and feedback: durable, idempotent, claimed exactly once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kinds.online.store import FeedbackStore, Generation
from rl_core.online import Feedback, FeedbackError


def rid(i: int) -> str:
    return f"cmpl-{i:032x}"


def served(store: FeedbackStore, i: int, version: int = 0, variant: str = "main") -> Generation:
    gen = Generation(
        rid(i), version, variant, f"{i}+1=", str(i + 1), [1, 2, 3], [4, 5], [-0.5, -0.25], True
    )
    store.record_generation(gen)
    return gen


def test_a_generation_round_trips_with_its_tokens_and_logprobs(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    gen = served(store, 7, version=3)
    assert store.generation(rid(7)) == gen
    assert store.generation(rid(8)) is None
    store.close()
    assert FeedbackStore(tmp_path / "f.db").generation(rid(7)) == gen  # on disk


def test_feedback_is_idempotent_and_refused_for_unknown_or_changed_requests(
    tmp_path: Path,
) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    served(store, 1)
    assert store.record_feedback(Feedback(rid(1), accepted=True)) is True
    assert store.record_feedback(Feedback(rid(1), accepted=True)) is False  # a retry
    with pytest.raises(FeedbackError, match="already has different feedback") as changed:
        store.record_feedback(Feedback(rid(1), accepted=False))
    assert changed.value.status == 409
    with pytest.raises(FeedbackError, match="no completion was served") as unknown:
        store.record_feedback(Feedback(rid(2), accepted=True))
    assert unknown.value.status == 404
    assert store.pending() == 1


def test_batches_are_claimed_once_and_the_same_batch_comes_back(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    for i in range(7):
        served(store, i)
        store.record_feedback(Feedback(rid(i), score=i / 10))
    assert store.claim("run-a", 1, 8) is None  # fewer waiting: nothing claimed
    first = store.claim("run-a", 1, 3)
    assert [r.generation.request_id for r in first] == [rid(0), rid(1), rid(2)]
    assert [r.feedback.score for r in first] == [0.0, 0.1, 0.2]
    assert store.claim("run-a", 1, 3) == first  # a retried iteration: the same records
    second = store.claim("run-a", 2, 3)
    assert [r.generation.request_id for r in second] == [rid(3), rid(4), rid(5)]
    assert store.pending() == 1
    reopened = FeedbackStore(tmp_path / "f.db")  # a resumed trainer
    assert reopened.claim("run-a", 2, 3) == second
    assert reopened.claim("run-b", 1, 3) is None  # another run: only one record left


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")

    def serve_and_judge(start: int) -> None:
        other = FeedbackStore(tmp_path / "f.db")  # a second connection, as a second process
        for i in range(start, start + 50):
            served(other, i)
            other.record_feedback(Feedback(rid(i), accepted=i % 2 == 0))

    threads = [threading.Thread(target=serve_and_judge, args=(k * 50,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.pending() == 200
    assert store.acceptance() == {(0, "main"): (100, 200)}
