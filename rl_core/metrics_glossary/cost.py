"""The ``cost/`` metrics: resource-hours per phase, in total and per 1,000 samples."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
COST_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "cost/cpu_hours_<phase>",
        "CPU-hours",
        "all",
        "This iteration's CPU-hours in the phase: its `time/<phase>` × the reserved CPUs.",
    ),
    MetricEntry(
        "cost/gpu_hours_<phase>",
        "GPU-hours",
        "all",
        "The same in GPU-hours, when the workers reserve GPUs.",
    ),
    MetricEntry(
        "cost/cpu_hours_total",
        "CPU-hours",
        "all",
        "The run's running total; a resumed run continues it.",
    ),
    MetricEntry(
        "cost/gpu_hours_total",
        "GPU-hours",
        "all",
        "The run's running total in GPU-hours (0 without GPUs); a resumed run continues it.",
    ),
    MetricEntry(
        "cost/cpu_hours_per_1k_samples",
        "CPU-hours",
        "all",
        "`cost/cpu_hours_total` per 1 000 samples trained on (see `env/total_steps`); after "
        "a resume the samples count from the resume.",
    ),
    MetricEntry(
        "cost/gpu_hours_per_1k_samples",
        "GPU-hours",
        "all",
        "`cost/gpu_hours_total` per 1 000 samples, likewise, when the workers reserve GPUs.",
    ),
)
