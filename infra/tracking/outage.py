"""What a run says and does while its MLflow server does not answer.

Metric batches are logged asynchronously (:class:`~infra.tracking.mlflow_tracker.MlflowTracker`):
while the server is down, MLflow's client retries each request with an exponential backoff
(urllib3's ``Retry``, configured by ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` and
``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``), and training goes on. urllib3 logs a warning for
every attempt of every queued request: dozens of lines a minute. :class:`RetryNotice`
turns them into one line per server and minute that says what is happening and for how
long MLflow keeps trying.
"""

from __future__ import annotations

import logging
import re
import threading
import time

#: urllib3 logs one warning per retried attempt on this logger.
URLLIB3_POOL_LOGGER = "urllib3.connectionpool"
#: urllib3 never sleeps longer than this between two attempts (``Retry.DEFAULT_BACKOFF_MAX``).
BACKOFF_MAX_S = 120.0
_HOST = re.compile(r"host='([^']+)', port=(\d+)")
_REASON = re.compile(
    r"(Failed to establish a new connection: \[Errno \d+\] [^'\")]+|Read timed out)"
)


def retry_budget_s(max_retries: int, backoff_factor: float) -> float:
    """Seconds an HTTP request of MLflow's client keeps retrying before it fails.

    urllib3 sleeps ``0`` after the first failed attempt and ``factor * 2**(n - 1)`` after
    the n-th (n >= 2), never more than :data:`BACKOFF_MAX_S`; jitter adds up to one second
    per sleep and is left out.

    Args:
        max_retries: ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``.
        backoff_factor: ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``.

    Returns:
        The sum of the sleeps between the attempts.
    """
    return sum(min(backoff_factor * 2 ** (n - 1), BACKOFF_MAX_S) for n in range(2, max_retries + 1))


def mlflow_retry_budget_s() -> float:
    """:func:`retry_budget_s` of MLflow's client as configured in this process."""
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR,
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
    )

    return retry_budget_s(
        MLFLOW_HTTP_REQUEST_MAX_RETRIES.get(), MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get()
    )


class RetryNotice(logging.Filter):
    """Collapses urllib3's per-attempt retry warnings into one line per server and interval.

    The line that passes is rewritten to name the server, the reason and the retry budget;
    the others are dropped. Other records pass unchanged.

    Args:
        interval_s: At most one line per server in this many seconds.
        budget_s: How long a request is retried (:func:`mlflow_retry_budget_s`).
    """

    def __init__(self, interval_s: float = 60.0, budget_s: float | None = None) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.budget_s = budget_s
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        message = record.getMessage()
        if not message.startswith("Retrying"):
            return True
        host = _HOST.search(message)
        server = f"{host.group(1)}:{host.group(2)}" if host else "the server"
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(server, float("-inf")) < self.interval_s:
                return False
            self._last[server] = now
        reason = _REASON.search(message)
        budget = self.budget_s if self.budget_s is not None else mlflow_retry_budget_s()
        record.msg = (
            "%s does not answer (%s); training goes on, metrics wait in a queue, and each "
            "request is retried for about %.0f s (MLFLOW_HTTP_REQUEST_MAX_RETRIES); this line "
            "repeats at most every %.0f s while it lasts"
        )
        record.args = (server, reason.group(1) if reason else "retrying", budget, self.interval_s)
        return True


_installed: list[RetryNotice] = []


def install_retry_notice() -> RetryNotice:
    """Put one :class:`RetryNotice` on urllib3's pool logger (idempotent); returns it."""
    if not _installed:
        notice = RetryNotice()
        logging.getLogger(URLLIB3_POOL_LOGGER).addFilter(notice)
        _installed.append(notice)
    return _installed[0]
