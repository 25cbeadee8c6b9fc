"""Ray workers' output through logging: a crashed worker's dump is detail (log file only)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator

import pytest

from infra.cluster import worker_output
from infra.cluster.worker_output import WorkerOutputLogger, worker_label
from infra.log_detail import DETAIL_FIELD


def _batch(pid: object, *lines: str, **fields: str) -> dict:
    return {"pid": pid, "lines": list(lines), "is_err": True, "ip": "127.0.0.1", **fields}


def test_a_crashed_workers_lines_are_detail_from_its_first_crash_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    printer = WorkerOutputLogger()
    with caplog.at_level(logging.INFO, logger="rlpipe.workers"):
        printer(_batch(11, "warming up", actor_name="EnvWorker"))
        printer(_batch(12, "other worker, fine", actor_name="ActorWorker"))
        printer(
            _batch(
                11, "Exception raised in creation task: x", "  File a.py", actor_name="EnvWorker"
            )
        )
        printer(_batch(11, "Extension modules: numpy, torch (total: 2)", actor_name="EnvWorker"))
        printer(_batch(12, "still fine", actor_name="ActorWorker"))
    shown = [r.getMessage() for r in caplog.records if not getattr(r, DETAIL_FIELD, False)]
    detail = [r.getMessage() for r in caplog.records if getattr(r, DETAIL_FIELD, False)]
    assert shown == [
        "(EnvWorker pid=11) warming up",
        "(ActorWorker pid=12) other worker, fine",
        "(ActorWorker pid=12) still fine",
    ]
    assert detail == [
        "(EnvWorker pid=11) Exception raised in creation task: x",
        "(EnvWorker pid=11)   File a.py",
        "(EnvWorker pid=11) Extension modules: numpy, torch (total: 2)",
    ]


def test_labels_and_raylet_lines() -> None:
    assert worker_label({"pid": 5, "task_name": "score"}) == "score pid=5"
    assert worker_label({"pid": 5}) == "pid=5"


def test_raylet_lines_have_no_prefix(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rlpipe.workers"):
        WorkerOutputLogger()(_batch("raylet", "A worker died"))
    assert [r.getMessage() for r in caplog.records] == ["A worker died"]


@pytest.fixture()
def routed(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerOutputLogger]:
    """Worker output routed through logging, our printer in Ray's dispatcher (no cluster)."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    printer = WorkerOutputLogger()
    monkeypatch.setattr(worker_output, "_enabled", True)
    monkeypatch.setattr(worker_output, "_arrivals", {"crash": -math.inf, "line": -math.inf})
    dispatcher.add_handler(worker_output.PRINTER, printer)
    yield printer
    dispatcher.remove_handler(worker_output.PRINTER)


def test_a_stopping_driver_waits_for_a_dump_that_arrives_late(routed) -> None:
    """The dump of a worker that died arrives after the driver saw its death (Ray forwards
    it from the log file): the wait returns once its last lines are in, not before."""
    since = time.monotonic()
    got: list[str] = []

    def forward() -> None:
        time.sleep(0.3)
        routed(_batch(21, "Exception raised in creation task: x", actor_name="EnvWorker"))
        time.sleep(0.3)  # the abort stack and module list come in a later poll
        routed(_batch(21, "Extension modules: numpy (total: 1)", actor_name="EnvWorker"))
        got.append("sent")

    sender = threading.Thread(target=forward)
    sender.start()
    started = time.monotonic()
    assert worker_output.wait_for_crash_dump(since, timeout=10, quiet=0.5)
    waited = time.monotonic() - started
    sender.join()
    assert got == ["sent"] and 1.0 < waited < 5, waited  # the last line, then 0.5 s quiet


def test_an_older_dump_does_not_count_and_the_wait_is_bounded(routed) -> None:
    routed(_batch(22, "Traceback (most recent call last):", actor_name="EnvWorker"))
    since = time.monotonic()  # a worker spawned after that crash
    started = time.monotonic()
    assert not worker_output.wait_for_crash_dump(since, timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 2


def test_without_routing_nothing_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_output, "_enabled", False)
    started = time.monotonic()
    assert not worker_output.wait_for_crash_dump(time.monotonic(), timeout=5)
    assert time.monotonic() - started < 0.5
