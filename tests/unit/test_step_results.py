"""Typed step results: metrics apart from control data, and how the run loop logs them."""

import pytest

from flows.iteration import IterationResult
from flows.iteration_metrics import log_progress, step_metrics, timing_metrics
from flows.terminal import PROGRESS_LOGGER
from infra.driver.step_runtime import StepResult, split_metrics


def test_split_metrics_keeps_numbers_under_a_section_and_the_rest_apart():
    metrics, info = split_metrics(
        {
            "train/loss": 0.25,
            "train/steps": 3,
            "train/flag": True,  # a boolean is not a metric
            "version": 7,  # no section: control data
            "rollout/versions": [1, 1],  # not a number
        }
    )
    assert metrics == {"train/loss": 0.25, "train/steps": 3.0}
    assert all(type(v) is float for v in metrics.values())
    assert info == {"train/flag": True, "version": 7, "rollout/versions": [1, 1]}


def test_step_result_of_drops_seconds_from_the_values():
    result = StepResult.of(1.5, {"seconds": 9.0, "env/episodes": 2, "dir": "x"}, env_steps=64)
    assert result == StepResult(1.5, {"env/episodes": 2.0}, 64, {"dir": "x"})


def test_step_metrics_add_worker_seconds_and_ignore_control_data():
    steps = {
        "rollout": StepResult(2.0, {"env/episodes": 3.0}, env_steps=512, info={"v": 1}),
        "update": StepResult(1.0, {"train/loss": 0.5}),
        "unknown_step": StepResult(100.0, {"other/x": 1.0}),  # not an iteration step
    }
    metrics = step_metrics(steps, env_steps=1024)
    assert metrics == {
        "time/rollout": 2.0,
        "env/episodes": 3.0,
        "time/update": 1.0,
        "train/loss": 0.5,
        "time/compute": 3.0,
        "env/total_steps": 1024.0,
    }


def test_timing_metrics_split_the_iteration_into_its_parts():
    result = IterationResult({}, body_started=10.5, body_ended=13.0)
    timing = timing_metrics(result, started=10.0, ended=13.25, compute=2.0)
    assert timing["time/iteration"] == pytest.approx(3.25)
    assert timing["time/orchestration"] == pytest.approx(1.25)
    assert timing["time/orch_flow_start"] == pytest.approx(0.5)
    assert timing["time/orch_tasks"] == pytest.approx(0.5)
    assert timing["time/orch_flow_end_and_tracking"] == pytest.approx(0.25)


MANIPULATION_ITERATION = {
    "env/total_steps": 8000.0,
    "env/episode_return_mean": 4.9,
    "env/success_rate": 0.25,
    "rollout/steps_per_second": 298.0,
    "rollout/reward_mean": 0.097,
    "eval/return_mean": 7.1,
    "eval/success_rate": 0.5625,
    "time/orchestration": 0.2,
}
LLM_ITERATION = {
    "env/total_steps": 64.0,
    "rollout/tokens_per_second": 1234.0,
    "rollout/steps_per_second": 8.0,  # an LLM rollout shows tokens/s, not steps/s
    "eval/accuracy": 0.5,
    "time/orchestration": 0.05,
}


@pytest.mark.parametrize(
    ("metrics", "line"),
    [
        (
            MANIPULATION_ITERATION,
            "iter 10/400 | env steps 8000 | return 4.9 | success 0.25 | 298 steps/s | "
            "reward 0.097 | eval 7.1 | eval success 0.56 | orch 200 ms",
        ),
        (LLM_ITERATION, "iter 10/400 | env steps 64 | 1234 tokens/s | accuracy 0.500 | orch 50 ms"),
    ],
)
def test_progress_line_shows_the_metrics_the_run_has(caplog, metrics, line):
    with caplog.at_level("INFO", logger=PROGRESS_LOGGER):
        log_progress(400, 9, metrics)
    assert caplog.messages == [line]
