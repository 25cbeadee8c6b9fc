"""The feedback-ready event: once per batch's worth of unclaimed records."""

from __future__ import annotations

import pytest

from kinds.online.events import ReadyEvents


def test_an_event_fires_each_time_another_batch_is_ready() -> None:
    fired: list[tuple[dict, dict]] = []
    events = ReadyEvents(4, "rlpipe.online.run", lambda res, payload: fired.append((res, payload)))
    for pending in range(1, 10):
        events(pending)
    assert [p["pending"] for _, p in fired] == [4, 8]
    resource = {"prefect.resource.id": "rlpipe.online.run", "rlpipe.online.trainer": "run"}
    assert fired[0] == (resource, {"pending": 4, "batch_size": 4})
    events(1)  # a trainer claimed two batches
    events(2)
    events(4)
    assert [p["pending"] for _, p in fired] == [4, 8, 4]


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReadyEvents(0, "rlpipe.online.run")


def test_an_externally_trained_endpoint_says_so_and_carries_the_flow_parameters() -> None:
    fired: list[tuple[dict, dict]] = []
    trigger = {"preset": "online_arith", "run_name": "r", "overrides": ["online.server=external"]}
    events = ReadyEvents(
        2, "rlpipe.online.r", lambda *e: fired.append(e), trainer="external", trigger=trigger
    )
    events(2)
    ((resource, payload),) = fired
    assert resource["rlpipe.online.trainer"] == "external"
    assert payload == {"pending": 2, "batch_size": 2, **trigger}
