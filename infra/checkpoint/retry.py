"""Retry a call on transient errors, with exponential backoff and jitter.

Used by remote checkpoint stores around each request, on top of the client's own retries
(botocore's ``standard`` mode), so that a brief outage of the endpoint does not fail a run.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")
#: Own generator: jitter must not advance the global RNG a run saves in its checkpoints.
_JITTER = random.Random()


def call_with_retries(
    fn: Callable[[], T],
    is_transient: Callable[[BaseException], bool],
    *,
    attempts: int = 3,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    what: str = "request",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn()``; on an error that ``is_transient`` accepts, wait and call it again.

    Errors that are not transient (a missing object, denied access...) are raised at once.

    Args:
        fn: The call.
        is_transient: Whether an error is worth retrying.
        attempts: Calls in all (at least 1).
        base_delay: Seconds before the second call; doubled for each further one.
        max_delay: Cap on one wait.
        what: What the call does, for the log line.
        sleep: Waiting function (tests pass a fake).

    Returns:
        What ``fn`` returned.

    Raises:
        BaseException: The last error, once ``attempts`` calls failed or when it is not
            transient.
    """
    for attempt in range(1, max(1, attempts) + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt >= attempts or not is_transient(exc):
                raise
            delay = min(max_delay, base_delay * 2 ** (attempt - 1)) * _JITTER.uniform(0.5, 1.0)
            logger.warning(
                "%s failed (%s: %s); retry %d/%d in %.1fs",
                what,
                type(exc).__name__,
                exc,
                attempt,
                attempts - 1,
                delay,
            )
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
