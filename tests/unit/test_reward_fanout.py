"""Reward scoring stays in the reward task while it is cheap, and fans out once it is not
(or when an injected fault must hit a Ray worker)."""

import time
from types import SimpleNamespace

from infra.driver.step_runtime import FanoutJob
from rl_core.config import load_config
from tasks.fanout import _run_job_timed, run_jobs_timed
from tasks.reward import note_scoring_time, should_fan_out


def session(threshold: float) -> SimpleNamespace:
    cfg = load_config(
        "grpo_arith",
        [
            f"reward.fanout_min_seconds={threshold}",
            "run.warm_start=null",
            "model.tiny_init=true",
            "model.model_path=/tmp/unused-tiny",
        ],
    )
    return SimpleNamespace(cfg=cfg, fanout_scoring=threshold == 0)


def job(fault: dict | None = None) -> FanoutJob:
    return FanoutJob("score_rewards", len, {"obj": []}, fault)


def test_cheap_scoring_stays_in_the_reward_task() -> None:
    s = session(0.5)
    assert not should_fan_out(s, [job(), job()])
    note_scoring_time(s, 0.003)
    assert not should_fan_out(s, [job(), job()])


def test_slow_scoring_switches_the_run_to_fan_out_for_good() -> None:
    s = session(0.5)
    note_scoring_time(s, 0.8)
    assert should_fan_out(s, [job()])
    note_scoring_time(s, 0.001)  # a later cheap batch does not switch back
    assert should_fan_out(s, [job()])


def test_zero_threshold_always_fans_out_and_a_fault_forces_it() -> None:
    assert should_fan_out(session(0.0), [job()])
    assert should_fan_out(session(0.5), [job(), job({"kind": "kill", "step": "reward"})])


def _slow_score(seconds: float) -> list[float]:
    time.sleep(seconds)
    return [1.0]


def test_a_fanned_out_job_reports_the_seconds_it_computed() -> None:
    # the longest job's seconds count as the reward step's compute, not as orchestration
    job = FanoutJob("score_rewards", _slow_score, {"seconds": 0.05})
    result, seconds = _run_job_timed(job, 0, 0)
    assert result == [1.0] and 0.05 <= seconds < 1.0
    assert run_jobs_timed([], 0) == (None, 0.0)
