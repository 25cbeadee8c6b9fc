"""MLflow system metrics (``system/*``) for a run given by id, sampled in a daemon thread.

MLflow's :class:`SystemMetricsMonitor` samples CPU, memory, disk and network (and NVIDIA/AMD
GPUs when ``pynvml``/``pyrsmi`` are installed) of the machine it runs on, here the driver's,
which with a local Ray cluster is also every worker's. It logs through its own
``MlflowClient`` with the explicit run id, so it needs no fluent active run, and stops when
:meth:`SystemMetricsMonitor.finish` is called or the run is no longer RUNNING.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def start_system_metrics(
    run_id: str, tracking_uri: str, interval: float, resume: bool = False
) -> Any | None:
    """Start sampling ``system/*`` metrics of this machine into run ``run_id``.

    Args:
        run_id: The MLflow run.
        tracking_uri: Its tracking URI.
        interval: Seconds between samples (each sample is logged; a run shorter than one
            interval records none). ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` overrides it.
        resume: Continue the step numbering of a re-attached run.

    Returns:
        The started monitor (call ``finish()`` to stop it), or None when psutil is missing.
    """
    try:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
    except ImportError as exc:  # psutil is an rlpipe dependency; guard custom installs
        logger.warning("system metrics disabled: %s (pip install psutil)", exc)
        return None
    monitor = SystemMetricsMonitor(
        run_id,
        sampling_interval=interval,
        samples_before_logging=1,
        resume_logging=resume,
        tracking_uri=tracking_uri,
    )
    monitor.start()
    return monitor
