"""The feedback store's mirror: every record written there too, a lost database rebuilt."""

from __future__ import annotations

import json
from pathlib import Path

from kinds.online.store import FeedbackStore
from kinds.online.store_mirror import StoreMirror, restore_store
from rl_core.online import Feedback
from tests.unit.test_feedback_store import rid, served


def test_a_lost_database_comes_back_with_the_same_batches(tmp_path: Path) -> None:
    mirror_dir = tmp_path / "mirror"
    db = tmp_path / "feedback.db"
    store = FeedbackStore(db, StoreMirror(str(mirror_dir)))
    for i in range(7):
        served(store, i, version=i // 3)
    for i in (4, 0, 2, 1, 3, 6):  # arrival order is not request order
        store.record_feedback(Feedback(rid(i), accepted=i % 2 == 0))
    first = store.claim("run", 0, 2)
    second = store.claim("run", 1, 2)
    store.close()
    assert (mirror_dir / "claims" / "run" / "00000001.json").is_file()
    for leftover in tmp_path.glob("feedback.db*"):
        leftover.unlink()
    counts = restore_store(db, str(mirror_dir))
    assert counts == {"generations": 7, "feedback": 6, "claimed": 4}
    restored = FeedbackStore(db)
    assert restored.claim("run", 0, 2) == first and restored.claim("run", 1, 2) == second
    assert restored.pending() == 2
    # the next batch takes the oldest unclaimed records, as the lost database would have
    assert [r.generation.request_id for r in restored.claim("run", 2, 2)] == [rid(3), rid(6)]
    assert restored.generation(rid(5)) is not None  # served, never judged: kept too
    assert restore_store(db, str(mirror_dir)) is None  # the file exists: nothing to do


def test_a_retried_feedback_is_written_to_the_mirror_again(tmp_path: Path) -> None:
    mirror_dir = tmp_path / "mirror"
    store = FeedbackStore(tmp_path / "f.db", StoreMirror(str(mirror_dir)))
    served(store, 1)
    assert store.record_feedback(Feedback(rid(1), accepted=True)) is True
    written = mirror_dir / "feedback" / f"{rid(1)}.json"
    body = json.loads(written.read_text())
    written.unlink()  # e.g. the first write failed after the database commit
    assert store.record_feedback(Feedback(rid(1), accepted=True)) is False
    assert json.loads(written.read_text()) == body  # same record, same arrival time
    store.close()
