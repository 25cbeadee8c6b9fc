"""Reward scoring stays in the reward task while it is cheap, and fans out once it is not
(or when an injected fault must hit a Ray worker)."""

from types import SimpleNamespace

from infra.driver.step_runtime import FanoutJob
from rl_core.config import load_config
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
