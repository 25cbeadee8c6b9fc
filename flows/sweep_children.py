"""How a sweep starts its runs: as train-CLI subprocesses, or as runs of a Prefect deployment.

Both launchers take one :class:`~rl_core.config.sweep.SweepRun` plus the overrides every run
shares, run it to its end and return an exit code (0 finished, anything else failed), so the
sweep collects and reports the runs the same way whichever launcher started them.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from prefect import task
from prefect.cache_policies import NO_CACHE

from rl_core.config import ConfigError
from rl_core.config.sweep import SweepRun

logger = logging.getLogger("rlpipe.sweep")
ROOT = Path(__file__).resolve().parents[1]
#: Seconds between two reads of a deployment run's state while the sweep waits for it.
DEPLOYMENT_POLL_S = 1


class ChildLauncher(Protocol):
    """Runs one run of a sweep to its end."""

    def __call__(self, run: SweepRun, shared: list[str]) -> int:
        """Run ``run`` with the ``shared`` overrides; returns its exit code."""
        ...


@dataclass(frozen=True)
class SubprocessLauncher:
    """Each run is ``python flows/train.py`` on this machine, its output in ``log_dir``.

    Attributes:
        preset: Preset name or YAML path.
        overrides: The overrides of every run (before the run's own).
        log_dir: Where ``<run name>.log`` is written.
    """

    preset: str
    overrides: tuple[str, ...]
    log_dir: Path

    def __call__(self, run: SweepRun, shared: list[str]) -> int:
        """Start the train CLI and wait for it; returns its exit code."""
        log = self.log_dir / f"{run.name}.log"
        command = [sys.executable, str(ROOT / "flows" / "train.py"), "--config", self.preset]
        command += [*self.overrides, *run.overrides, *shared]
        with open(log, "ab") as out:
            logger.info("starting %s (log %s)", run.name, log)
            code = subprocess.run(
                command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            ).returncode
        if code != 0:
            logger.warning("%s exited with %d; see %s", run.name, code, log)
        return code


@dataclass(frozen=True)
class DeploymentLauncher:
    """Each run is a run of a train deployment (``flow/deployment``), picked up by a worker.

    The deployment run is a subflow of the sweep's flow run in the Prefect UI and is tagged
    ``sweep:<sweep name>``.

    Attributes:
        deployment: The deployment's ``flow/deployment`` name, e.g. ``train/train-ppo-cartpole``.
        preset: Preset name or YAML path (as the worker's checkout sees it).
        overrides: The overrides of every run (before the run's own).
        sweep_name: The sweep's name (the runs' tag).
    """

    deployment: str
    preset: str
    overrides: tuple[str, ...]
    sweep_name: str

    def __call__(self, run: SweepRun, shared: list[str]) -> int:
        """Create the deployment run and wait until it ends; returns its exit code."""
        from prefect.deployments import run_deployment

        parameters = {
            "preset": self.preset,
            "overrides": [*self.overrides, *run.overrides, *shared],
            "run_name": run.name,
        }
        logger.info("starting %s as a run of deployment %s", run.name, self.deployment)
        flow_run = run_deployment(
            self.deployment,
            parameters=parameters,
            timeout=None,
            poll_interval=DEPLOYMENT_POLL_S,
            tags=[f"sweep:{self.sweep_name}"],
            as_subflow=True,
        )
        code = exit_code_of(flow_run.state)
        if code != 0:
            state = flow_run.state
            logger.warning(
                "%s: deployment run %s ended %s (%s); see its logs in the Prefect UI",
                run.name,
                flow_run.name,
                state.name if state else "without a state",
                state.message if state else "",
            )
        return code


def exit_code_of(state: Any) -> int:
    """The exit code a deployment run's final state stands for: 0 when Completed, else 1."""
    return 0 if state is not None and state.is_completed() else 1


@task(name="sweep_run", task_run_name="sweep_run-{run.name}", cache_policy=NO_CACHE)
def train_child(
    run: SweepRun, launcher: ChildLauncher, shared: list[str], slots: threading.Semaphore
) -> int:
    """Run one run of the sweep to its end (waiting for a slot first); returns its exit code."""
    with slots:
        return launcher(run, shared)


def check_deployment(name: str) -> None:
    """Fail early when ``name`` is no deployment on the Prefect API in use.

    Raises:
        ConfigError: Not ``flow/deployment``, or no such deployment (the known ones listed).
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import DeploymentStatus
    from prefect.exceptions import ObjectNotFound

    if name.count("/") != 1:
        raise ConfigError(
            f"--deployment {name!r}: expected flow/deployment, e.g. train/train-ppo-cartpole"
        )
    with get_client(sync_client=True) as api:
        try:
            deployment = api.read_deployment_by_name(name)
        except ObjectNotFound:
            flows = {f.id: f.name for f in api.read_flows(limit=200)}
            deployments = api.read_deployments(limit=200)
            known = ", ".join(sorted(f"{flows.get(d.flow_id)}/{d.name}" for d in deployments))
            raise ConfigError(
                f"--deployment {name!r}: no such deployment on {api.api_url} (deployments "
                f"there: {known or 'none'}); deploy it first: prefect deploy --name ..."
            ) from None
    if deployment.status != DeploymentStatus.READY:
        logger.warning(
            "no worker polls work pool %s yet: the runs wait until one starts",
            deployment.work_pool_name,
        )
