"""Two `python flows/train.py` with one run name: the second is refused, the first finishes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
from prefect.settings import PREFECT_API_URL, temporary_settings

from infra.checkpoint.lease_holder import holder_text
from tests.integration.conftest import (
    CARTPOLE_EXPERIMENT,
    kill_process_group,
    run_process,
    start_process,
    train_cmd,
)

pytestmark = pytest.mark.integration
RUN = "one-writer"
ITERATIONS = 16
SMALL = (
    f"run.name={RUN}",
    f"run.max_iterations={ITERATIONS}",
    "run.checkpoint_interval=4",
    "run.eval_interval=0",
    "env.num_envs=4",
    "rollout.num_steps=32",
)


def wait_for_lease(path: Path, pid: int, proc: subprocess.Popen, timeout: float = 180) -> dict:
    """The lease record once process ``pid`` holds the lease at ``path``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"first training exited early with {proc.returncode}")
        try:
            record = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            record = {}
        if record.get("pid") == pid:
            return record
        time.sleep(0.1)
    raise AssertionError(f"process {pid} did not take the lease {path} within {timeout}s")


def test_second_cli_on_the_same_run_exits_2_naming_the_first(
    tmp_path: Path, train_env, prefect_api: str
) -> None:
    log = tmp_path / "first.log"
    first = start_process(train_cmd(tmp_path, *SMALL), train_env, log)
    try:
        lease_path = tmp_path / RUN / "checkpoints" / "lease.json"
        holder = wait_for_lease(lease_path, first.pid, first)
        started = time.perf_counter()
        second = run_process(train_cmd(tmp_path, *SMALL), train_env, timeout=300)
        refused_after = time.perf_counter() - started
        assert first.poll() is None, "the first run ended before the second was refused"
        first.wait(timeout=600)
    finally:
        kill_process_group(first)
    first_log = log.read_text()
    assert first.returncode == 0, first_log[-6000:]

    # the second: exit 2 with the one-line holder message, naming the first's flow run
    out = second.stdout + second.stderr
    assert second.returncode == 2, out[-6000:]
    expected = (
        f"error: run '{RUN}' is being trained by {holder_text(holder)}; "
        "wait for it to finish or stop it"
    )
    assert expected in out, out[-4000:]
    assert holder["prefect_flow_run_url"].startswith(prefect_api.removesuffix("/api"))
    print(f"second CLI refused after {refused_after:.1f}s")  # noqa: T201 (test report)

    # the first: finished every iteration, released the lease; one MLflow run in all
    assert "rlpipe run finished" in first_log
    manifest = json.loads((tmp_path / RUN / "checkpoints" / "latest.json").read_text())
    assert manifest["step"] == ITERATIONS
    assert not lease_path.exists()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(CARTPOLE_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], f"tags.`rlpipe.run_name` = '{RUN}'")
    assert [r.info.run_id for r in runs] == [manifest["mlflow_run_id"]]
    assert runs[0].info.status == "FINISHED"
    assert runs[0].data.tags["prefect.flow_run_id"] == holder["prefect_flow_run_id"]

    # Prefect: the first flow run completed, the second failed with the same message
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        flow_runs = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"train-{RUN}"]))
        )
    states = {str(r.id): r.state for r in flow_runs}
    assert len(states) == 2, states
    assert states.pop(holder["prefect_flow_run_id"]).is_completed()
    (refused,) = states.values()
    assert refused.is_failed()
    assert "is being trained by host" in (refused.message or ""), refused.message
