"""Ray workers' output through logging: a crashed worker's dump is detail (log file only)."""

from __future__ import annotations

import logging

import pytest

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
