"""Feedback on served completions: what a request may hold, and the reward it gives.

A client that received a completion (with its ``request_id``) reports what the user did
with it: ``accepted`` (true/false), a ``score`` in ``[0, 1]``, or ``edited_text`` (the
completion as the user rewrote it). Exactly one of the three per request. Everything here is
pure: the server validates a request body with :func:`parse_feedback` before anything is
written, and the trainer turns a stored record into a reward with :func:`feedback_reward`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

#: A request id the server hands out: ``cmpl-`` and 32 hexadecimal digits.
REQUEST_ID = re.compile(r"^cmpl-[0-9a-f]{32}$")
#: The fields of a feedback body; exactly one of :data:`SIGNALS` with ``request_id``.
SIGNALS = ("accepted", "score", "edited_text")
MAX_EDITED_CHARS = 100_000


class FeedbackError(ValueError):
    """A feedback body that cannot be recorded (the server answers 4xx with the message).

    Attributes:
        status: The HTTP status it maps to (400 malformed, 404 unknown request id, 409 a
            different feedback for the same request id, 422 wrong field types or values).
    """

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Feedback:
    """One user's verdict on one served completion.

    Attributes:
        request_id: The id the completion was served with.
        accepted: Whether the user kept the completion (or None).
        score: A grade in ``[0, 1]`` (or None).
        edited_text: The completion as the user rewrote it (or None).
    """

    request_id: str
    accepted: bool | None = None
    score: float | None = None
    edited_text: str | None = None

    @property
    def signal(self) -> str:
        """Which of :data:`SIGNALS` this feedback gives."""
        return next(name for name in SIGNALS if getattr(self, name) is not None)


def parse_feedback(body: Any) -> Feedback:
    """Validate a feedback request body.

    Args:
        body: The decoded JSON body.

    Returns:
        The feedback.

    Raises:
        FeedbackError: Not an object (400), unknown fields, a malformed request id, not
            exactly one signal, or a signal of the wrong type or range (422).
    """
    if not isinstance(body, dict):
        raise FeedbackError(
            f"the body must be a JSON object, got {type(body).__name__}", status=400
        )
    unknown = sorted(set(body) - {"request_id", *SIGNALS})
    if unknown:
        raise FeedbackError(
            f"unknown field(s) {', '.join(unknown)}; allowed: request_id and one of "
            f"{', '.join(SIGNALS)}"
        )
    request_id = body.get("request_id")
    if not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
        raise FeedbackError(
            f"request_id must be the id a completion was served with ('cmpl-' and 32 hex "
            f"digits), got {request_id!r}"
        )
    given = [name for name in SIGNALS if body.get(name) is not None]
    if len(given) != 1:
        raise FeedbackError(
            f"give exactly one of {', '.join(SIGNALS)}; got {', '.join(given) if given else 'none'}"
        )
    name, value = given[0], body[given[0]]
    if name == "accepted" and not isinstance(value, bool):
        raise FeedbackError(f"accepted must be true or false, got {value!r}")
    if name == "score":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FeedbackError(f"score must be a number in [0, 1], got {value!r}")
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise FeedbackError(f"score must be a number in [0, 1], got {value!r}")
        value = float(value)
    if name == "edited_text" and (not isinstance(value, str) or len(value) > MAX_EDITED_CHARS):
        shown = value if not isinstance(value, str) else f"{len(value)} characters"
        raise FeedbackError(
            f"edited_text must be a string of at most {MAX_EDITED_CHARS} characters, got {shown!r}"
        )
    return Feedback(request_id, **{name: value})


def feedback_reward(feedback: Feedback, completion: str) -> float:
    """The reward of a served completion given its feedback.

    ``accepted``: 1 or 0; ``score``: the score; ``edited_text``: how much of the
    completion the user kept, the similarity ratio of the two texts (1 for no change;
    :class:`difflib.SequenceMatcher`).
    """
    if feedback.accepted is not None:
        return 1.0 if feedback.accepted else 0.0
    if feedback.score is not None:
        return float(feedback.score)
    return difflib.SequenceMatcher(None, completion, feedback.edited_text or "").ratio()
