"""Real components for integration tests: a Prefect server on 127.0.0.1 (own PREFECT_HOME)
and training runs as subprocesses (each starts its own local Ray cluster). Tests that drive
workers on a Ray cluster without Prefect or MLflow live in tests/cluster."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.ops.prefect_api import LocalPrefectServer

ROOT = Path(__file__).resolve().parents[2]
#: The default preset's MLflow experiment: named by what it trains (env id, model type).
CARTPOLE_EXPERIMENT = "CartPole-v1-mlp_actor_critic"
#: The model the default preset registers.
CARTPOLE_MODEL = f"rlpipe-{CARTPOLE_EXPERIMENT}"
#: Run name of :func:`small_cartpole_run`.
SMALL_RUN = "small-run"


def find_run(client: Any, run_name: str) -> Any:
    """The one training run named ``run_name`` in any experiment of an MLflow store."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, filter_string=f"attributes.run_name = '{run_name}'")
    return run


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Prefect server started for the test session."""
    home = tmp_path_factory.mktemp("prefect-home")
    server = LocalPrefectServer(home / "server.log", extra_env={"PREFECT_HOME": str(home)})
    try:
        server.wait_healthy(timeout=90)
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def small_cartpole_run(
    tmp_path_factory: pytest.TempPathFactory, prefect_api: str
) -> dict[str, Any]:
    """A finished 3-iteration CartPole run of the test session, shared by the UI and the
    promotion tests: a constant baseline holds ``best`` (version 1) of the CartPole model,
    and the run registers version 2 with ``tracking.promotion=gated`` (``best`` stays).

    Returns:
        ``out`` (its output folder), ``uri`` and ``client`` (its MLflow store), ``env`` (the
        training environment), ``run`` (its MLflow run).
    """
    from mlflow.tracking import MlflowClient

    from tests.constant_policy import register_constant_policy

    out = tmp_path_factory.mktemp("small-cartpole")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    client = MlflowClient(uri, registry_uri=uri)
    register_constant_policy(client, out, CARTPOLE_MODEL)
    env = training_env(prefect_api, out)
    run_train(
        out,
        env,
        f"run.name={SMALL_RUN}",
        "run.max_iterations=3",
        "run.eval_interval=1",
        "env.num_envs=4",
        "rollout.num_steps=32",
        "eval.num_episodes=2",
        "tracking.promotion=gated",
        "tracking.learning_curve=true",  # the MLflow UI test opens it
    )
    manifest = json.loads((out / SMALL_RUN / "checkpoints" / "latest.json").read_text())
    run = client.get_run(manifest["mlflow_run_id"])
    return {"out": out, "uri": uri, "client": client, "env": env, "run": run}


@pytest.fixture()
def train_env(prefect_api: str, tmp_path: Path) -> dict[str, str]:
    """Environment for a training subprocess reporting to the test's Prefect server."""
    return training_env(prefect_api, tmp_path)


def training_env(prefect_api: str, home: Path) -> dict[str, str]:
    """:func:`train_env` for any scope: Prefect client state under ``home``."""
    skip = ("RAY_ADDRESS", "PYTEST_", "MLFLOW_TRACKING_URI")  # runs log to their own SQLite
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(
        PREFECT_API_URL=prefect_api,
        PREFECT_HOME=str(home / "prefect-client-home"),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


_MLFLOW_TEMPLATE: list[Path] = []


def seed_mlflow_store(output_dir: Path) -> None:
    """Give ``output_dir`` an empty MLflow SQLite store, unless it has one.

    A copy of one made once per test process: creating a store runs MLflow's schema
    migrations, seconds of CPU per run on 2 cores (a run creates the same store itself
    when none is there).
    """
    target = Path(output_dir) / "mlflow.db"
    if target.exists():
        return
    if not _MLFLOW_TEMPLATE:
        from mlflow.tracking import MlflowClient

        folder = Path(tempfile.mkdtemp(prefix="rlpipe-mlflow-template-"))
        atexit.register(shutil.rmtree, folder, True)
        MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()
        _MLFLOW_TEMPLATE.append(folder / "mlflow.db")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_MLFLOW_TEMPLATE[0], target)


#: Left out of test runs unless a test asks for it: the end-of-run learning-curve plot
#: (matplotlib, seconds of CPU per run). The tests that look at it pass
#: ``tracking.learning_curve=true``.
QUICK_RUN = ("tracking.learning_curve=false",)
#: Also left out of runs of the default preset (its eval section has videos): the final
#: evaluation's GIF, a task of its own (a Ray task worker started, pygame rendering). The
#: test that looks at it passes ``eval.video=true``.
QUICK_DEFAULT_PRESET_RUN = (*QUICK_RUN, "eval.video=false")


def train_cmd(output_dir: Path, *overrides: str, seed_store: bool = True) -> list[str]:
    """Command line of a training run writing under ``output_dir`` (its MLflow store seeded
    by :func:`seed_mlflow_store`, unless ``seed_store`` is False: a test that checks that
    a failing run wrote nothing), with :data:`QUICK_RUN` (or, for the default preset,
    :data:`QUICK_DEFAULT_PRESET_RUN`) before ``overrides``."""
    if seed_store:
        seed_mlflow_store(output_dir)
    quick = QUICK_RUN if "--config" in overrides else QUICK_DEFAULT_PRESET_RUN
    return [
        sys.executable,
        str(ROOT / "flows" / "train.py"),
        f"run.output_dir={output_dir}",
        *quick,
        *overrides,
    ]


def run_process(
    cmd: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` from the repository root in its own session; its output is captured.

    Past ``timeout`` the test fails showing the output so far.
    """
    try:
        return subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        parts = (exc.stdout, exc.stderr)  # bytes, even with text=True (on POSIX)
        said = "".join(
            p.decode(errors="replace") if isinstance(p, bytes) else p or "" for p in parts
        )
        raise AssertionError(f"still running after {timeout:.0f} s:\n{said[-4000:]}") from None


def start_process(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``cmd`` from the repository root in its own process group, output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def run_train(output_dir: Path, env: dict[str, str], *overrides: str, timeout: float = 600) -> str:
    """Run a training to completion; returns its output, failing the test on a non-zero exit."""
    proc = run_process(train_cmd(output_dir, *overrides), env, timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{out[-6000:]}"
    return out


def run_stopped_at_2_then_resumed(output_dir: Path, env: dict[str, str], *overrides: str) -> str:
    """A training whose iteration 2 exits at its first step (after the step-2 checkpoint),
    then the same command again, which resumes it; the second run's output."""
    # the fault stays armed on the rerun: it fires at iteration 2 only, which a resume skips
    fail_at_2 = {**env, "RLPIPE_FAULTS": "exit:weight_sync@2"}
    failed = run_process(train_cmd(output_dir, *overrides), fail_at_2, timeout=600)
    assert failed.returncode != 0 and "injected fault exit" in failed.stdout + failed.stderr
    out = run_train(output_dir, fail_at_2, *overrides)
    assert "resumed_from: 2" in out
    return out


def run_evaluate(run_name: str, output_dir: Path, env: dict[str, str], *args: str) -> str:
    """``flows/evaluate.py`` on a run's latest checkpoint; its standard output (the JSON
    summary), failing the test on a non-zero exit."""
    cmd = [sys.executable, str(ROOT / "flows" / "evaluate.py"), "--run-name", run_name]
    proc = run_process([*cmd, "--output-dir", str(output_dir), *args], env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def wait_for_checkpoint(
    run_dir: Path, step: int, proc: subprocess.Popen, timeout: float = 300
) -> dict:
    """Wait until the run's committed checkpoint reaches ``step``; returns the manifest."""
    manifest_path = run_dir / "checkpoints" / "latest.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"training exited early with {proc.returncode}")
        if manifest_path.exists():
            manifest = json.loads(manifest_path.read_text())
            if manifest["step"] >= step:
                return manifest
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint at step {step} within {timeout}s")


def kill_process_group(proc: subprocess.Popen, signum: int = signal.SIGKILL) -> None:
    """SIGKILL (or ``signum``) a process started with ``start_new_session`` and everything
    it started; wait for it."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
