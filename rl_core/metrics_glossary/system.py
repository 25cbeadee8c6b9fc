"""The ``system/`` metrics: MLflow's system metrics monitor."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
SYSTEM_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "system/<name>",
        "as named",
        "all",
        "MLflow's system metrics (`cpu_utilization_percentage`, "
        "`system_memory_usage_megabytes`, `disk_usage_percentage`, GPU ones with `pynvml`).",
    ),
)
