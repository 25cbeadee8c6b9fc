"""Feedback bodies on served completions: validation, rewards, single-response baselines."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.online import (
    Feedback,
    FeedbackError,
    RunningMeanBaseline,
    feedback_reward,
    parse_feedback,
    single_response_advantages,
)
from rl_core.registry import RegistryError

RID = "cmpl-" + "0123456789abcdef" * 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"request_id": RID, "accepted": True}, Feedback(RID, accepted=True)),
        ({"request_id": RID, "accepted": False}, Feedback(RID, accepted=False)),
        ({"request_id": RID, "score": 1}, Feedback(RID, score=1.0)),
        ({"request_id": RID, "score": 0.25}, Feedback(RID, score=0.25)),
        ({"request_id": RID, "edited_text": "19"}, Feedback(RID, edited_text="19")),
        ({"request_id": RID, "accepted": True, "score": None}, Feedback(RID, accepted=True)),
    ],
)
def test_good_bodies_parse(body: dict, expected: Feedback) -> None:
    assert parse_feedback(body) == expected


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ([RID, True], 400, "must be a JSON object, got list"),
        ({"request_id": RID, "accepted": True, "user": "x"}, 422, "unknown field.*user"),
        ({"request_id": "abc", "accepted": True}, 422, "request_id must be.*'abc'"),
        ({"request_id": RID.upper(), "accepted": True}, 422, "request_id must be"),
        ({"accepted": True}, 422, "request_id must be.*None"),
        ({"request_id": RID}, 422, "exactly one of accepted, score, edited_text; got none"),
        ({"request_id": RID, "accepted": True, "score": 1.0}, 422, "got accepted, score"),
        ({"request_id": RID, "accepted": "yes"}, 422, "accepted must be true or false"),
        ({"request_id": RID, "accepted": 1}, 422, "accepted must be true or false"),
        ({"request_id": RID, "score": 1.5}, 422, r"score must be a number in \[0, 1\]"),
        ({"request_id": RID, "score": -0.1}, 422, r"score must be"),
        ({"request_id": RID, "score": float("nan")}, 422, r"score must be"),
        ({"request_id": RID, "score": True}, 422, r"score must be"),
        ({"request_id": RID, "score": "0.5"}, 422, r"score must be"),
        ({"request_id": RID, "edited_text": 19}, 422, "edited_text must be a string"),
        ({"request_id": RID, "edited_text": "x" * 100_001}, 422, "100001 characters"),
    ],
)
def test_bad_bodies_are_refused_naming_the_field(body: object, status: int, message: str) -> None:
    with pytest.raises(FeedbackError, match=message) as caught:
        parse_feedback(body)
    assert caught.value.status == status


def test_rewards_of_each_signal() -> None:
    assert feedback_reward(Feedback(RID, accepted=True), "19") == 1.0
    assert feedback_reward(Feedback(RID, accepted=False), "19") == 0.0
    assert feedback_reward(Feedback(RID, score=0.3), "19") == 0.3
    assert feedback_reward(Feedback(RID, edited_text="19"), "19") == 1.0
    assert feedback_reward(Feedback(RID, edited_text="1"), "19") == pytest.approx(2 / 3)
    assert feedback_reward(Feedback(RID, edited_text="xy"), "19") == 0.0


def test_running_mean_baseline_subtracts_the_mean_of_earlier_batches() -> None:
    state = RunningMeanBaseline(momentum=0.5)
    first = single_response_advantages(np.array([1.0, 0.0, 1.0, 0.0]), "running_mean", state)
    assert first.tolist() == [0.5, -0.5, 0.5, -0.5]  # the first batch: its own mean
    assert state.mean == 0.5
    second = single_response_advantages(np.array([1.0, 1.0]), "running_mean", state)
    assert second.tolist() == [0.5, 0.5]  # against the mean before this batch
    assert state.mean == pytest.approx(0.75)
    resumed = RunningMeanBaseline()
    resumed.load_state_dict(state.state_dict())
    assert resumed == state
    raw = single_response_advantages(np.array([1.0, 0.0]), "none", state)
    assert raw.tolist() == [1.0, 0.0] and state.mean == pytest.approx(0.75)
    with pytest.raises(RegistryError, match="running_mean"):
        single_response_advantages(np.array([1.0]), "group_mean", state)
