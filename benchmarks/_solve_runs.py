"""Launch one timed solve run: rlpipe's train CLI, or the Stable-Baselines3 anchor.

Each run is a fresh subprocess; its clock starts just before ``subprocess.Popen`` and
"solved" is a wall-clock (``time.time()``) stamp taken by the process itself:

* rlpipe: the MLflow timestamp of the first ``eval/return_mean`` at or above the target
  (the driver stamps it with ``time.time()`` when it logs the iteration's metrics, read
  back afterwards from the run's SQLite store with ``MlflowClient``);
* SB3: ``time.time()`` when the solving evaluation returned, printed by the process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _solve_protocol import RESULT_PREFIX, EvalProtocol, SolveResult
from _stack import stack_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: Variables that would point a child at shared services instead of its own.
DROPPED_VARS = ("PREFECT_API_URL", "RAY_ADDRESS", "MLFLOW_TRACKING_URI")
#: rlpipe's exit code after a requested stop (Ctrl-C) with a committed checkpoint.
EXIT_STOPPED = 130


def child_env(stack_home: Path | None = None) -> dict[str, str]:
    """This environment, without shared-service pointers, one thread per process.

    Args:
        stack_home: A running local stack the child uses (None: its own services).
    """
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_VARS}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COLUMNS="200")
    env.update(stack_env(stack_home))
    return env


def launch(
    cmd: list[str], log: Path, timeout: float, stack_home: Path | None = None
) -> tuple[int, float, float]:
    """Run ``cmd`` from the repository root, output to ``log``.

    On timeout the process gets SIGINT (rlpipe stops after the iteration, with a
    checkpoint), then SIGKILL if it has not exited 60 s later.

    Returns:
        Exit code, launch time (``time.time()``) and seconds to exit.
    """
    with log.open("w") as out:
        started_unix, started = time.time(), time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=child_env(stack_home), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    return code, started_unix, time.perf_counter() - started


def tail(log: Path, lines: int = 30) -> str:
    """The last lines of a log file."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def run_rlpipe(
    seed: int,
    preset: str | None,
    overrides: list[str],
    target: float | None,
    timeout: float,
    stack_home: Path | None = None,
) -> SolveResult:
    """``python flows/train.py [--config PRESET] [overrides] run.seed=S run.output_dir=TMP``.

    Args:
        seed: ``run.seed``.
        preset: ``--config`` value; None runs the CLI's default preset.
        overrides: Extra dotted overrides.
        target: Mean evaluation return that counts as solved.
        timeout: Seconds before the run is stopped (it then counts as unsolved).
        stack_home: A running local stack whose Prefect API and Ray head the run uses (its
            MLflow store stays the run's own SQLite file, read back here).
    """
    with tempfile.TemporaryDirectory(prefix="rlpipe-solve-") as tmp:
        out = Path(tmp)
        cmd = [sys.executable, "flows/train.py", *(["--config", preset] if preset else [])]
        cmd += [*overrides, f"run.seed={seed}", f"run.output_dir={out / 'run'}"]
        if stack_home is not None:
            cmd.append(f"tracking.tracking_uri=sqlite:///{out / 'run' / 'mlflow.db'}")
        log = out / "train.log"
        code, started_unix, exit_s = launch(cmd, log, timeout, stack_home)
        if code not in (0, EXIT_STOPPED):
            raise RuntimeError(f"{' '.join(cmd)} exited with {code}:\n{tail(log)}")
        return _read_mlflow(out / "run", started_unix, exit_s, target)


def _read_mlflow(
    output_dir: Path, started_unix: float, exit_s: float, target: float | None
) -> SolveResult:
    """The solving (else the last) evaluation of the single run under ``output_dir``."""
    from mlflow.tracking import MlflowClient

    db = output_dir / "mlflow.db"
    if not db.is_file():
        raise RuntimeError(f"no MLflow store at {db} (tracking.tracking_uri set elsewhere?)")
    client = MlflowClient(f"sqlite:///{db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments)
    if len(runs) != 1:
        raise RuntimeError(f"expected one MLflow run in {db}, found {len(runs)}")
    run_id = runs[0].info.run_id

    def history(key: str) -> dict[int, float]:
        return {m.step: m.value for m in client.get_metric_history(run_id, key)}

    evals = sorted(client.get_metric_history(run_id, "eval/return_mean"), key=lambda m: m.step)
    solving = next((m for m in evals if target is not None and m.value >= target), None)
    shown = solving or (evals[-1] if evals else None)
    if shown is None:
        return SolveResult(False, None, None, None, exit_s)
    after = {k: history(f"time/{k}").get(shown.step, 0.0) for k in ("eval_video", "checkpoint")}
    steps = sorted(client.get_metric_history(run_id, "env/total_steps"), key=lambda m: m.step)
    steps = [m for m in steps if m.step <= shown.step]
    rate = 0.0  # env steps per second from the first iteration's metrics to the shown one
    if len(steps) > 1 and steps[-1].timestamp > steps[0].timestamp:
        rate = (steps[-1].value - steps[0].value) / (
            (steps[-1].timestamp - steps[0].timestamp) / 1000
        )
    return SolveResult(
        solved=solving is not None,
        solved_s=solving.timestamp / 1000 - started_unix if solving else None,
        env_steps=int(history("env/total_steps").get(shown.step, 0)),
        eval_return=shown.value,
        exit_s=exit_s,
        notes={
            "after_eval_s": sum(after.values()),
            "env_steps_per_s": rate,
            # off-policy runs: gradient steps up to the shown evaluation (0 for PPO)
            "gradient_steps": sum(
                v for k, v in history("train/gradient_steps").items() if k <= shown.step
            ),
        },
    )


def run_sb3(seed: int, protocol: EvalProtocol, timeout: float) -> SolveResult:
    """``python benchmarks/_sb3_anchor.py SEED PROTOCOL`` (see that module).

    Args:
        seed: Seed of the model and the training envs.
        protocol: rlpipe's evaluation protocol.
        timeout: Seconds before the run is stopped (it then counts as unsolved).
    """
    with tempfile.TemporaryDirectory(prefix="sb3-solve-") as tmp:
        log = Path(tmp) / "sb3.log"
        cmd = [sys.executable, str(HERE / "_sb3_anchor.py"), str(seed), protocol.to_json()]
        code, started_unix, exit_s = launch(cmd, log, timeout)
        lines = [x for x in log.read_text().splitlines() if x.startswith(RESULT_PREFIX)]
        if not lines:
            if code == 0:
                raise RuntimeError(f"no result line from the SB3 run:\n{tail(log)}")
            return SolveResult(False, None, None, None, exit_s, {"exit_code": float(code)})
        result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    solved_unix = result["solved_unix"]
    return SolveResult(
        solved=bool(result["solved"]),
        solved_s=solved_unix - started_unix if solved_unix is not None else None,
        env_steps=result["env_steps"],
        eval_return=result["eval_return"],
        exit_s=exit_s,
    )
