"""The feedback-ready event: once per batch's worth of unclaimed records."""

from __future__ import annotations

import pytest

from infra.online.events import ReadyEvents


def test_an_event_fires_each_time_another_batch_is_ready() -> None:
    fired: list[tuple[str, dict]] = []
    events = ReadyEvents(4, "rlpipe.online.run", lambda rid, payload: fired.append((rid, payload)))
    for pending in range(1, 10):
        events(pending)
    assert [p["pending"] for _, p in fired] == [4, 8]
    assert fired[0] == ("rlpipe.online.run", {"pending": 4, "batch_size": 4})
    events(1)  # a trainer claimed two batches
    events(2)
    events(4)
    assert [p["pending"] for _, p in fired] == [4, 8, 4]


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReadyEvents(0, "rlpipe.online.run")
