"""While the MLflow server does not answer: one clear line a minute, and no failed run."""

from __future__ import annotations

import logging

from mlflow.tracking import MlflowClient

from infra.processes import free_port
from infra.tracking.mlflow_tracker import MlflowTracker
from infra.tracking.outage import RetryNotice, retry_budget_s

REFUSED = (
    "Retrying (Retry(total=6, connect=6, read=7, redirect=7, status=7)) after connection "
    "broken by 'NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=%d): Failed to "
    "establish a new connection: [Errno 111] Connection refused\")': /api/2.0/mlflow/runs/"
    "log-batch"
)


def urllib3_record(message: str) -> logging.LogRecord:
    return logging.LogRecord(
        "urllib3.connectionpool", logging.WARNING, __file__, 0, message, None, None
    )


def test_the_retry_budget_sums_urllib3s_backoff():
    # MLflow's defaults (7 retries, factor 2): 0, 4, 8, 16, 32, 64, then 120 (capped)
    assert retry_budget_s(7, 2) == 4 + 8 + 16 + 32 + 64 + 120
    assert retry_budget_s(1, 2) == 0
    assert retry_budget_s(3, 1) == 2 + 4


def test_retry_warnings_become_one_line_per_server_and_minute():
    notice = RetryNotice(interval_s=60, budget_s=244)
    first = urllib3_record(REFUSED % 5000)
    assert notice.filter(first)
    line = first.getMessage()
    assert line.startswith("127.0.0.1:5000 does not answer (Failed to establish a new connection")
    assert "Connection refused" in line and "about 244 s" in line and "every 60 s" in line
    assert not notice.filter(urllib3_record(REFUSED % 5000))  # the same server, within a minute
    assert notice.filter(urllib3_record(REFUSED % 5001))  # another server has its own line
    other = urllib3_record("Connection pool is full, discarding connection: 127.0.0.1")
    assert notice.filter(other) and other.getMessage().startswith("Connection pool is full")
    notice.interval_s = 0
    assert notice.filter(urllib3_record(REFUSED % 5000))  # the interval has passed


def test_metrics_that_could_not_be_sent_are_an_error_line_not_a_failed_run(
    tmp_path, monkeypatch, caplog
):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "exp", "run")
    tracker.log_metrics({"a": 1.0}, step=0)
    tracker.flush()
    # the server goes away: nothing answers on this port, and the client does not retry
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    tracker.client = MlflowClient(f"http://127.0.0.1:{free_port()}")
    tracker.tracking_uri = tracker.client.tracking_uri
    with caplog.at_level(logging.ERROR, logger="infra.tracking.mlflow_tracker"):
        for step in range(1, 4):
            tracker.log_metrics({"a": float(step)}, step=step)
        tracker.flush()
    errors = [r.getMessage() for r in caplog.records if r.name == "infra.tracking.mlflow_tracker"]
    assert len(errors) == 3, errors
    assert all("metrics could not be sent to MLflow at http://127.0.0.1:" in e for e in errors)
    assert not tracker._pending


def test_sent_batches_are_not_kept_while_a_run_goes_on(tmp_path):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "exp", "run")
    for step in range(50):
        tracker.log_metrics({"a": float(step)}, step=step)
        for future in tracker._pending[-1]._operation_futures:  # as a real iteration would
            future.result(timeout=60)  # give it time: the batch is sent before the next one
    assert len(tracker._pending) == 1  # each log call dropped the batches sent before it
    tracker.flush()
    history = tracker.client.get_metric_history(tracker.run_id, "a")
    assert sorted(m.step for m in history) == list(range(50))


def test_the_notice_is_installed_once_per_process(monkeypatch):
    from infra.tracking import outage

    monkeypatch.setattr(outage, "_installed", [])
    pool = logging.getLogger(outage.URLLIB3_POOL_LOGGER)
    before = list(pool.filters)
    try:
        notice = outage.install_retry_notice()
        assert outage.install_retry_notice() is notice  # once per process
        assert pool.filters.count(notice) == 1
    finally:
        pool.filters[:] = before
