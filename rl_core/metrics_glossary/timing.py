"""The ``time/`` metrics: where each iteration's wall time went."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
TIMING_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "time/<step>",
        "seconds",
        "all",
        "Worker time of each step that ran: the wall time of its worker-group calls "
        "(embodied `evaluate`: the slowest evaluation task's own time), its snapshot "
        "(`time/snapshot_<stateful_step>`) and video (`time/eval_video`) included.",
    ),
    MetricEntry(
        "time/compute",
        "seconds",
        "all",
        "Sum of the iteration's `time/<step>`.",
    ),
    MetricEntry(
        "time/iteration",
        "seconds",
        "all",
        "Wall time from calling the `iteration-<k>` child flow to having queued its metrics.",
    ),
    MetricEntry(
        "time/orchestration",
        "seconds",
        "all",
        "`time/iteration` − `time/compute`: the Prefect flow and task engines, API calls, "
        "queuing the MLflow metrics.",
    ),
    MetricEntry(
        "time/orchestration_ratio",
        "fraction",
        "all",
        "`time/orchestration` / `time/iteration`.",
    ),
    MetricEntry(
        "time/orch_flow_start",
        "seconds",
        "all",
        "From calling the child flow to its body starting (flow-run creation, state API calls).",
    ),
    MetricEntry(
        "time/orch_tasks",
        "seconds",
        "all",
        "Inside the child flow's body, the time not spent in workers (the task engine "
        "around each step).",
    ),
    MetricEntry(
        "time/orch_flow_end_and_tracking",
        "seconds",
        "all",
        "From the body returning to the iteration's metrics being queued for MLflow.",
    ),
    MetricEntry(
        "time/snapshot_<stateful_step>",
        "seconds",
        "all",
        "Keeping what the step changes so that a retry can undo it (counted in the step's "
        "`time/<step>`).",
    ),
    MetricEntry(
        "time/eval_video",
        "seconds",
        "embodied",
        "Rendering the evaluation video (counted in `time/evaluate`), when one was recorded.",
    ),
)
