"""The Prefect UI progress bar is updated at most every few seconds, and at the end."""

from __future__ import annotations

from typing import Any

import pytest

from flows import prefect_ui
from flows.prefect_ui import ProgressArtifact


@pytest.fixture
def api_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    calls: list[tuple[str, float]] = []

    def create(progress: float, **_: Any) -> str:
        calls.append(("create", progress))
        return "artifact-id"

    def update(artifact_id: str, progress: float) -> None:
        assert artifact_id == "artifact-id"
        calls.append(("update", progress))

    monkeypatch.setattr(prefect_ui, "create_progress_artifact", create)
    monkeypatch.setattr(prefect_ui, "update_progress_artifact", update)
    return calls


def test_updates_are_throttled_and_the_last_one_is_forced(
    api_calls: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(prefect_ui.time, "monotonic", lambda: now[0])
    bar = ProgressArtifact("run", total=10, min_interval_s=5.0)
    bar.update(0)
    for done in range(1, 4):  # within 5 s of the first call: no API call
        now[0] += 1.0
        bar.update(done)
    now[0] += 3.0  # 6 s after the first call
    bar.update(4)
    bar.update(4, force=True)  # unchanged: nothing to send
    bar.update(7, force=True)
    assert api_calls == [("create", 0.0), ("update", 40.0), ("update", 70.0)]


def test_the_first_call_always_creates_the_bar(api_calls: list[tuple[str, float]]) -> None:
    ProgressArtifact("run", total=0).update(3)
    assert api_calls == [("create", 100.0)]
