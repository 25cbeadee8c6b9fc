"""SIGINT and SIGTERM request the same stop; the flow-level handlers are put back after."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from flows.stop_signals import exit_code_of, reset_stop_request, stop_signal, stop_signals_in_flow
from infra.driver.session import STOP_REQUESTED


@pytest.fixture(autouse=True)
def clean_signals() -> Iterator[None]:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    reset_stop_request()
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    reset_stop_request()


def test_sigterm_inside_a_flow_requests_a_stop_and_the_engine_handler_comes_back() -> None:
    def engine_handler(signum: int, frame: object) -> None:  # stands for Prefect's bridge
        raise AssertionError("the engine's handler must not run inside the block")

    signal.signal(signal.SIGTERM, engine_handler)
    with stop_signals_in_flow():
        os.kill(os.getpid(), signal.SIGTERM)
        assert STOP_REQUESTED.is_set() and stop_signal() == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is engine_handler
    assert exit_code_of(signal.SIGTERM) == 143 and exit_code_of(signal.SIGINT) == 130


def test_the_first_signal_is_the_one_reported() -> None:
    with stop_signals_in_flow():
        os.kill(os.getpid(), signal.SIGINT)
    assert stop_signal() == signal.SIGINT


def test_a_child_flow_body_keeps_the_stop_under_prefects_own_handler() -> None:
    """The train flow's body runs child flows, whose engines install Prefect's SIGTERM
    bridge again; inside a child flow's body the signal still only requests a stop."""
    from prefect.utilities.engine import capture_sigterm

    from flows.iteration import child_flow_body

    with stop_signals_in_flow(), capture_sigterm(), child_flow_body():
        os.kill(os.getpid(), signal.SIGTERM)
        assert STOP_REQUESTED.is_set() and stop_signal() == signal.SIGTERM


def test_sigterm_in_a_child_engine_outside_its_body_is_a_stop_not_an_abort() -> None:
    """Around a child flow's body, Prefect's bridge raises TerminationSignal and sends the
    signal on to the handler it replaced: the stop is requested once (the run loop then
    stops after the iteration), and the process is not aborted by a "second" signal."""
    from prefect.exceptions import TerminationSignal
    from prefect.utilities.engine import capture_sigterm

    with stop_signals_in_flow():
        with pytest.raises(TerminationSignal), capture_sigterm():
            os.kill(os.getpid(), signal.SIGTERM)
        assert STOP_REQUESTED.is_set() and stop_signal() == signal.SIGTERM


def test_a_termination_prefect_kept_for_itself_is_a_stop_request() -> None:
    """A cancellation from the Prefect UI: the runner announces it before its SIGTERM, and
    Prefect's bridge then raises TerminationSignal without passing the signal on."""
    from prefect.exceptions import TerminationSignal

    from flows.stop_signals import note_termination

    note_termination(TerminationSignal(signal.SIGTERM))
    assert STOP_REQUESTED.is_set() and stop_signal() == signal.SIGTERM
    note_termination(TerminationSignal(signal.SIGINT))  # a stop already requested stays
    assert stop_signal() == signal.SIGTERM


def test_after_a_child_flow_that_saw_a_cancellation_the_stop_handlers_come_back() -> None:
    """A cancellation from the Prefect UI is announced to the process (its "intent") before
    the runner's SIGTERM. A child flow's engine that saw the announcement leaves Prefect's
    bridge installed when it ends: without taking the handlers back, the SIGTERM would raise
    in the run loop between iterations and the run would end failed."""
    from prefect._internal import control_listener
    from prefect.utilities.engine import capture_sigterm, is_prefect_sigterm_handler_installed

    from flows.stop_signals import reclaim_stop_signals

    with stop_signals_in_flow():
        try:
            with capture_sigterm():  # the child flow's engine
                control_listener._set_intent("cancel")  # acknowledged during the child
            assert is_prefect_sigterm_handler_installed(), "Prefect no longer keeps its bridge"
            reclaim_stop_signals()
            os.kill(os.getpid(), signal.SIGTERM)  # the runner's signal: no TerminationSignal
            assert STOP_REQUESTED.is_set() and stop_signal() == signal.SIGTERM
        finally:
            control_listener.clear_intent()


def test_outside_a_flow_body_taking_the_handlers_back_does_nothing() -> None:
    from flows.stop_signals import reclaim_stop_signals, request_stop

    reclaim_stop_signals()
    assert signal.getsignal(signal.SIGTERM) is not request_stop
