"""Connecting to Ray: a local cluster by default, or a configured address."""

from __future__ import annotations

import logging
import os
import signal
import site
from pathlib import Path
from typing import Any

import ray

from infra.cluster import worker_output
from infra.cluster.runtime_env import (
    all_store_access_vars,
    apply_base_env,
    with_vars,
    without_vars,
    worker_env_vars,
)

logger = logging.getLogger(__name__)
#: The folder holding the rlpipe packages this process imports (rl_core, infra, ...): a
#: checkout, or the site-packages folder of an installed wheel.
PACKAGES_ROOT = Path(__file__).resolve().parents[2]
#: Modules every worker of a new local cluster imports when it starts, before it is given
#: work: what every rlpipe worker imports (seconds of CPU), done while the driver imports
#: and configures the run instead of after it created the workers.
WORKER_PRELOAD_MODULES = ("torch", "gymnasium", "infra.cluster.worker_base")


#: Task and actor-call event records the GCS of a local cluster keeps (the newest ones).
GCS_TASK_EVENTS_KEPT = 10_000


def resolve_address(configured: str | None) -> str:
    """``cluster.address`` if set, else ``RAY_ADDRESS``, else ``"local"`` (new local cluster)."""
    return configured or os.environ.get("RAY_ADDRESS") or "local"


def connect_cluster(cluster_cfg: Any) -> dict[str, float]:
    """:func:`connect` as the ``cluster`` config section says (address, CPUs, GPUs)."""
    return connect(cluster_cfg.address, cluster_cfg.num_cpus, cluster_cfg.num_gpus_per_node)


def connect(
    address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None
) -> dict[str, float]:
    """Connect this process to Ray once (no-op if already connected).

    Args:
        address: Ray address (``None`` → :func:`resolve_address`).
        num_cpus: CPUs of a newly started local cluster (ignored when attaching).
        num_gpus: GPUs a newly started local cluster announces (None: the GPUs Ray
            detects; ignored when attaching). More than the machine has makes logical GPUs
            (placement tests on CPU machines).

    Returns:
        The cluster's total resources.
    """
    apply_base_env()
    if not ray.is_initialized():
        target = resolve_address(address)
        env = worker_env_vars()
        env["PYTHONPATH"] = worker_pythonpath(env.get("PYTHONPATH", ""))
        kwargs: dict = {
            "address": target,
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": True,
        }
        if target == "local" or _is_loopback(target):
            loopback_only()
        if target == "local":
            # A new local cluster's workers inherit the environment of its node processes,
            # which ray.init starts from this one: set there, the variables need no job
            # runtime_env, and the workers Ray starts ahead (one per CPU) can host the
            # actors (with a runtime_env each actor waits for a worker of its own: ~1.5 s
            # more per run start on 2 cores).
            kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
            if num_gpus is not None:
                kwargs["num_gpus"] = num_gpus
            kwargs["_node_ip_address"] = "127.0.0.1"
            # Keep idle task workers alive: by default Ray kills idle workers above one per
            # CPU after 1 s, and our actors already take those slots, so every fan-out
            # (evaluation, reward scoring) would pay a cold Python start (~3 s each).
            kwargs["_system_config"] = {
                "num_workers_soft_limit": kwargs["num_cpus"] + 8,
                # the workers Ray starts ahead import these while the driver still starts
                "preload_python_modules": list(WORKER_PRELOAD_MODULES),
                # The GCS keeps an event record of every task and actor call for the
                # dashboard (100,000 by default): a long run's GCS grew by ~110 MB per
                # 1,000 iterations of ppo_cartpole until that cap. rlpipe starts no dashboard.
                "task_events_max_num_task_in_gcs": GCS_TASK_EVENTS_KEPT,
            }
        else:
            kwargs.pop("include_dashboard")
            kwargs["runtime_env"] = {"env_vars": env}
        logger.info("connecting to Ray (%s)", target)
        previous_sigterm = signal.getsignal(signal.SIGTERM)
        # A new local cluster's processes, and so its workers, inherit this environment:
        # store credentials reach only the workers that open the store (worker_group).
        local = target == "local"
        with (
            without_vars(all_store_access_vars() if local else ()),
            with_vars(env if local else {}),
        ):
            ray.init(**kwargs)
        if callable(previous_sigterm):  # Ray replaces it; keep the application's own handler
            signal.signal(signal.SIGTERM, previous_sigterm)
        worker_output.install()  # (when the CLI routes workers' output through logging)
    return ray.cluster_resources()


def worker_pythonpath(forwarded: str = "") -> str:
    """The ``PYTHONPATH`` of the workers: they import the rlpipe code the driver imports.

    A checkout's :data:`PACKAGES_ROOT` (an editable install, or a checkout on the driver's
    ``PYTHONPATH``) comes first, wherever the driver runs; an installed wheel's site-packages
    folder is left out, as every process of that interpreter has it already.

    Args:
        forwarded: The driver's ``PYTHONPATH`` (``os.pathsep``-separated), kept after it.
    """
    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    installed = {Path(p).resolve() for p in site_dirs}
    own = [] if PACKAGES_ROOT in installed else [str(PACKAGES_ROOT)]
    paths = [*own, *filter(None, forwarded.split(os.pathsep))]
    return os.pathsep.join(dict.fromkeys(paths))


def loopback_only() -> None:
    """Make a new local cluster listen on 127.0.0.1 only.

    On Linux, Ray resolves ``_node_ip_address="127.0.0.1"`` to the machine's outward
    address and its servers (GCS, raylet, object manager, workers) listen on every
    interface. With clusters "disabled" (Ray's own switch for single-machine use) it keeps
    the loopback address, and every server binds to it. The variable reaches the processes
    Ray starts; the constant is read by this process, which imported Ray already.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def _is_loopback(address: str) -> bool:
    """Whether a Ray address (``host:port``, ``ray://host:port``) names this machine's loopback."""
    host = address.split("://")[-1].rsplit(":", 1)[0]
    return host in ("127.0.0.1", "localhost")


def shutdown() -> None:
    """Disconnect from Ray (stops a local cluster this process started)."""
    if ray.is_initialized():
        ray.shutdown()
