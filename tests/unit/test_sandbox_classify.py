"""The sandbox's outcome rule, on made-up launcher reports (no process is started)."""

from __future__ import annotations

import signal

import pytest

from infra.sandbox.classify import LauncherReport, classify, limit_from_stderr, parse_report
from rl_core.agents.outcomes import Outcome


def exited(code: int) -> int:
    return code << 8


def killed(sig: int) -> int:
    return sig


def verdict(report: LauncherReport, stderr: str = "", timed_out: bool = False):
    return classify(report, timed_out=timed_out, cpu_seconds=2, stderr=stderr)


def test_the_report_is_parsed_and_broken_lines_are_ignored() -> None:
    report = parse_report(b"mode 77 pid+net\nstarted\nexit 256 0.5 0.75\nexit x\ngarbage\n")
    assert (report.uid, report.network_isolated, report.started) == (77, True, True)
    assert (report.status, report.cpu_code, report.cpu_all) == (256, 0.5, 0.75)
    assert parse_report(b"mode 5 none:Operation_not_permitted\n").network_isolated is False


@pytest.mark.parametrize(
    ("last_line", "limit"),
    [
        ("MemoryError", "memory"),
        ("OSError: [Errno 12] Cannot allocate memory", "memory"),
        ("OSError: [Errno 27] File too large", "file_size"),
        ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "processes"),
        ("RuntimeError: can't start new thread", "processes"),
        ("ValueError: boom", None),
    ],
)
def test_the_limit_is_read_from_the_last_error_line(last_line: str, limit: str | None) -> None:
    assert limit_from_stderr(f"Traceback (most recent call last):\n  ...\n{last_line}\n\n") == limit


@pytest.mark.parametrize(
    ("status", "cpu", "outcome", "limit"),
    [
        (exited(0), 0.1, Outcome.OK, None),
        (exited(1), 0.1, Outcome.MODEL_FAILURE, None),
        (killed(signal.SIGXCPU), 2.0, Outcome.MODEL_FAILURE, "cpu"),
        (killed(signal.SIGKILL), 2.5, Outcome.MODEL_FAILURE, "cpu"),
        # the code may signal itself: that cannot take it out of the group's statistics
        (killed(signal.SIGKILL), 0.1, Outcome.MODEL_FAILURE, None),
        (killed(signal.SIGXFSZ), 0.1, Outcome.MODEL_FAILURE, "file_size"),
        (killed(signal.SIGSEGV), 0.1, Outcome.MODEL_FAILURE, None),  # a stack overflow
        (killed(signal.SIGTERM), 0.1, Outcome.MODEL_FAILURE, None),
    ],
)
def test_exits_and_signals(status: int, cpu: float, outcome: Outcome, limit: str | None) -> None:
    report = LauncherReport(started=True, status=status, cpu_code=cpu)
    assert (verdict(report).outcome, verdict(report).limit) == (outcome, limit)


def test_the_wall_clock_is_the_models_after_the_start_and_the_infrastructures_before() -> None:
    after = verdict(LauncherReport(started=True, wall=True, status=killed(signal.SIGKILL)))
    assert (after.outcome, after.limit, after.exit_code) == (Outcome.MODEL_FAILURE, "wall", -9)
    backstop = verdict(LauncherReport(started=True), timed_out=True)
    assert (backstop.outcome, backstop.limit) == (Outcome.MODEL_FAILURE, "wall")
    before = verdict(LauncherReport(), timed_out=True)
    assert (before.outcome, before.limit, before.exit_code) == (
        Outcome.INFRA_FAILURE,
        "wall",
        None,
    )


def test_a_launcher_error_or_a_missing_exit_is_the_infrastructures() -> None:
    error = verdict(LauncherReport(started=True, error="PermissionError: [Errno 13]"))
    assert error.outcome is Outcome.INFRA_FAILURE and "Errno 13" in error.detail
    assert verdict(LauncherReport(started=True)).outcome is Outcome.INFRA_FAILURE
