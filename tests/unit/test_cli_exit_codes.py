"""Exit codes of the train CLI: 0 finished, 1 failed, 2 bad input, 130 stopped by Ctrl-C,
143 stopped by SIGTERM.

The flow is replaced by a function (no Prefect, Ray or MLflow is started); the error line
and the summary never show a secret.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from flows.cli import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_FINISHED,
    EXIT_STOPPED,
    EXIT_TERMINATED,
    run_cli,
)
from flows.stop_signals import reset_stop_request
from infra.checkpoint.store import CheckpointError
from infra.cluster import ray_cluster
from infra.cluster.placement import PlacementError
from infra.driver.session import STOP_REQUESTED

SECRET_URI = "https://alice:pw-123456@mlflow.example.invalid"


@pytest.fixture()
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run the CLI with ``flow`` against a Prefect API that is never called."""
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    # no Ray either: the flow is a function (a local cluster would cost seconds per test)
    monkeypatch.setattr(ray_cluster, "connect", lambda *args, **kwargs: {"CPU": 2.0})
    monkeypatch.setattr(ray_cluster, "shutdown", lambda: None)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    reset_stop_request()

    def run(flow: Any) -> int:
        return run_cli(flow, [f"run.output_dir={tmp_path}", "run.name=codes"])

    yield run
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    reset_stop_request()


def summary(**kwargs: Any) -> dict[str, Any]:
    return {"run_name": "codes", "iterations": 3, "tracking_uri": SECRET_URI}


def test_a_finished_run_exits_0_and_its_summary_masks_credentials(cli, capsys) -> None:
    assert cli(summary) == EXIT_FINISHED
    err = capsys.readouterr().err
    assert "https://***@mlflow.example.invalid" in err and "pw-123456" not in err


def test_ctrl_c_stops_after_the_iteration_with_130(cli, capsys) -> None:
    def interrupted(**kwargs: Any) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGINT)  # like a terminal's Ctrl-C: the handler runs
        assert STOP_REQUESTED.is_set()  # the run finishes its iteration and checkpoints
        return summary()

    assert cli(interrupted) == EXIT_STOPPED
    err = capsys.readouterr().err
    assert "stopped on request (SIGINT) after iteration 3" in err
    assert "rerun the same command" in err
    assert "rlpipe run stopped" in err and "run finished" not in err


def test_sigterm_stops_like_ctrl_c_with_143(cli, capsys) -> None:
    def terminated(**kwargs: Any) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGTERM)  # what kill, systemd and Kubernetes send
        assert STOP_REQUESTED.is_set()  # not the default action: the process lives on
        return summary()

    assert cli(terminated) == EXIT_TERMINATED == 143
    err = capsys.readouterr().err
    assert "stopped on request (SIGTERM) after iteration 3" in err


def test_a_failure_after_a_stop_signal_exits_with_the_signal_code(cli, capsys) -> None:
    def stopped_warm_start(**kwargs: Any) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("the warm start sft_arith stopped before finishing")

    assert cli(stopped_warm_start) == EXIT_STOPPED
    assert "error: the warm start sft_arith stopped before finishing" in capsys.readouterr().err


def test_any_other_failure_exits_1_with_one_masked_line(cli, capsys, tmp_path) -> None:
    def failing(**kwargs: Any) -> dict[str, Any]:
        raise RuntimeError(f"cannot reach {SECRET_URI}/api/2.0/mlflow/runs/get")

    assert cli(failing) == EXIT_FAILED
    err = capsys.readouterr().err
    log = tmp_path / "codes" / "rlpipe.log"
    assert "error: cannot reach https://***@mlflow.example.invalid/api" in err
    assert f"(full log: {log})" in err and "Traceback" not in err
    assert "pw-123456" not in err
    text = log.read_text()  # the traceback is in the run's log, masked too
    assert "Traceback" in text and "in failing" in text and "pw-123456" not in text


def test_a_refused_checkpoint_is_bad_input(cli, capsys) -> None:
    def refused(**kwargs: Any) -> dict[str, Any]:
        raise CheckpointError("run 'codes' has no committed checkpoint and run.resume=must")

    assert cli(refused) == EXIT_BAD_INPUT
    assert "error: run 'codes' has no committed checkpoint" in capsys.readouterr().err


def test_a_placement_the_cluster_cannot_host_is_bad_input(cli, capsys) -> None:
    """(That ``place`` refuses it before any worker starts, naming the allowed GPUs, is
    ``tests/cluster/test_gpu_placement.py``.)"""
    message = (
        "cluster.component_placement.actor: GPU index 1 (in 1) does not exist: the cluster "
        "has 1 GPU (1 node(s) x 1); allowed GPU indices 0-0"
    )

    def refused(**kwargs: Any) -> dict[str, Any]:
        raise PlacementError(message)

    assert cli(refused) == EXIT_BAD_INPUT
    assert f"error: {message}" in " ".join(capsys.readouterr().err.split())


def test_bad_config_is_bad_input_before_the_flow(cli, capsys) -> None:
    def never(**kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the flow must not start")

    assert run_cli(never, ["actor.lr=-1", "run.name=codes"]) == EXIT_BAD_INPUT
    assert "actor.lr" in capsys.readouterr().err


def test_a_finished_run_rerun_has_its_own_summary_title(cli, capsys) -> None:
    def nothing_left(**kwargs: Any) -> dict[str, Any]:
        return {**summary(), "already_finished": True}

    assert cli(nothing_left) == EXIT_FINISHED
    err = capsys.readouterr().err
    assert "rlpipe run had already finished: nothing trained" in err
