"""Cost accounting: resource-hours per phase and per sample, totals across a resume, budget."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from infra.cost import TOTAL_CPU, CostMeter, reserved_resources


class Group:
    def __init__(self, workers: int, cpus: float, gpus: float = 0.0) -> None:
        self.placement = SimpleNamespace(num_cpus_per_worker=cpus, num_gpus_per_worker=gpus)
        self.workers = workers

    def __len__(self) -> int:
        return self.workers


def test_reserved_resources_sum_every_worker():
    assert reserved_resources([Group(2, 0.495), Group(1, 0.99)]) == pytest.approx(
        {"CPU": 1.98, "GPU": 0.0}
    )
    assert reserved_resources([Group(4, 2.0, 1.0)]) == {"CPU": 8.0, "GPU": 4.0}


def test_each_phase_costs_its_seconds_times_the_reservation():
    meter = CostMeter({"CPU": 2.0, "GPU": 0.0})
    out = meter.add_iteration(
        {"time/rollout": 1800.0, "time/update": 900.0, "time/orchestration": 36.0}, samples=1000
    )
    assert out["cost/cpu_hours_rollout"] == 1.0  # half an hour x 2 CPUs
    assert out["cost/cpu_hours_update"] == 0.5
    assert out["cost/cpu_hours_orchestration"] == pytest.approx(0.02)
    assert "cost/gpu_hours_rollout" not in out  # no GPUs reserved
    assert out[TOTAL_CPU] == pytest.approx(1.52)
    assert out["cost/cpu_hours_per_1k_samples"] == pytest.approx(1.52)
    out = meter.add_iteration({"time/rollout": 1800.0}, samples=1000)
    assert out[TOTAL_CPU] == pytest.approx(2.52)
    assert out["cost/cpu_hours_per_1k_samples"] == pytest.approx(1.26)


def test_gpu_runs_are_budgeted_in_gpu_hours():
    meter = CostMeter({"CPU": 16.0, "GPU": 2.0}, budget_hours=1.0)
    assert meter.budget_unit == "GPU"
    out = meter.add_iteration({"time/update": 900.0}, samples=64)
    assert out["cost/gpu_hours_update"] == 0.5 and out["cost/cpu_hours_update"] == 4.0
    assert meter.spent_hours == 0.5 and not meter.next_iteration_exceeds_budget()  # 0.5 + 0.5
    meter.add_iteration({"time/update": 360.0}, samples=64)  # 0.7 spent, next ≈ 0.2
    assert not meter.next_iteration_exceeds_budget()
    meter.add_iteration({"time/update": 720.0}, samples=64)  # 1.1 spent
    assert meter.next_iteration_exceeds_budget()


def test_totals_continue_after_a_resume_and_no_budget_never_stops():
    meter = CostMeter({"CPU": 1.0, "GPU": 0.0})
    meter.resume_from(3.0, None)
    out = meter.add_iteration({"time/rollout": 3600.0}, samples=0)
    assert out[TOTAL_CPU] == 4.0 and "cost/cpu_hours_per_1k_samples" not in out
    assert not meter.next_iteration_exceeds_budget()
    assert math.isclose(meter.summary()["cpu_hours"], 4.0)
