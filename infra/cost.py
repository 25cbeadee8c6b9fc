"""Cost accounting: resource-hours per pipeline phase, per sample, and the run's budget.

A run reserves resources for its long-lived workers (Ray ``num_cpus`` / ``num_gpus`` of
every worker of every group) for as long as it runs, busy or not, so each phase costs its
wall time times the run's reservation: ``hours(phase) = seconds(phase) / 3600 × reserved``.
Orchestration (everything between the steps) is a phase too. The totals carry over a
resume: they continue from the last ones logged to MLflow.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rl_core.steps import COST_PHASES

logger = logging.getLogger(__name__)

#: Metric of the running total (resumed runs continue it).
TOTAL_CPU = "cost/cpu_hours_total"
TOTAL_GPU = "cost/gpu_hours_total"


def reserved_resources(groups: list[Any]) -> dict[str, float]:
    """CPUs and GPUs the worker groups reserve.

    CPUs are the Ray ``num_cpus`` of every worker, summed. GPUs are the GPUs of the run's
    placement: on a GPU placement every GPU a worker lives with is reserved whole for the
    run (one placement-group bundle each), however the workers on it share it; otherwise
    the Ray ``num_gpus`` of every worker, summed.
    """
    cpus = gpus = 0.0
    bundles: set[int] = set()
    for group in groups:
        placement = getattr(group, "placement", None)
        workers = len(group)
        cpus += workers * float(getattr(placement, "num_cpus_per_worker", 0.0) or 0.0)
        if getattr(placement, "on_gpus", False):
            bundles.update(placement.worker_gpus)
        else:
            gpus += workers * float(getattr(placement, "num_gpus_per_worker", 0.0) or 0.0)
    return {"CPU": cpus, "GPU": gpus + len(bundles)}


@dataclass
class CostMeter:
    """Adds up resource-hours iteration by iteration.

    Attributes:
        reserved: ``{"CPU": n, "GPU": m}`` the run holds.
        budget_hours: ``run.budget_hours`` (None: no budget), in GPU-hours when the run
            reserves GPUs, CPU-hours otherwise.
        cpu_hours: CPU-hours spent so far (this run and the attempts it resumed).
        gpu_hours: GPU-hours spent so far.
        last_iteration_hours: Budget hours of the last iteration (the next one's estimate).
    """

    reserved: dict[str, float]
    budget_hours: float | None = None
    cpu_hours: float = 0.0
    gpu_hours: float = 0.0
    last_iteration_hours: float = 0.0
    samples: float = 0.0

    @property
    def budget_unit(self) -> str:
        """``GPU`` when the run reserves GPUs, else ``CPU``."""
        return "GPU" if self.reserved.get("GPU", 0.0) > 0 else "CPU"

    @property
    def spent_hours(self) -> float:
        """Hours spent in the budget's unit."""
        return self.gpu_hours if self.budget_unit == "GPU" else self.cpu_hours

    def resume_from(self, cpu_hours: float | None, gpu_hours: float | None) -> None:
        """Continue the totals of an earlier attempt (the last values logged)."""
        self.cpu_hours = float(cpu_hours or 0.0)
        self.gpu_hours = float(gpu_hours or 0.0)

    def add_iteration(self, metrics: dict[str, float], samples: float) -> dict[str, float]:
        """Account one iteration from its ``time/<phase>`` metrics.

        Args:
            metrics: The iteration's metrics (``time/<phase>`` seconds).
            samples: Samples the iteration accepted for training (env steps, or responses).

        Returns:
            ``cost/*`` metrics: CPU- and GPU-hours per phase of this iteration, the running
            totals and the CPU-hours per 1 000 accepted samples so far.
        """
        cpus, gpus = self.reserved.get("CPU", 0.0), self.reserved.get("GPU", 0.0)
        out: dict[str, float] = {}
        seconds = 0.0
        for phase in COST_PHASES:
            value = metrics.get(f"time/{phase}")
            if value is None:
                continue
            seconds += float(value)
            out[f"cost/cpu_hours_{phase}"] = float(value) / 3600 * cpus
            if gpus:
                out[f"cost/gpu_hours_{phase}"] = float(value) / 3600 * gpus
        self.cpu_hours += seconds / 3600 * cpus
        self.gpu_hours += seconds / 3600 * gpus
        self.samples += samples
        self.last_iteration_hours = seconds / 3600 * (gpus if self.budget_unit == "GPU" else cpus)
        out[TOTAL_CPU] = self.cpu_hours
        out[TOTAL_GPU] = self.gpu_hours
        if self.samples:
            out["cost/cpu_hours_per_1k_samples"] = self.cpu_hours / self.samples * 1000
            if gpus:
                out["cost/gpu_hours_per_1k_samples"] = self.gpu_hours / self.samples * 1000
        return out

    def next_iteration_exceeds_budget(self) -> bool:
        """Whether one more iteration like the last one would pass ``budget_hours``."""
        if self.budget_hours is None:
            return False
        return self.spent_hours + self.last_iteration_hours > self.budget_hours

    def summary(self) -> dict[str, Any]:
        """Totals for the run's summary."""
        return {"cpu_hours": round(self.cpu_hours, 6), "gpu_hours": round(self.gpu_hours, 6)}
