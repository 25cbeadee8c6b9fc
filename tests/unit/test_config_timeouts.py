"""The ``timeouts`` section: defaults, positive finite seconds, heartbeat rule, errors."""

import pytest

from infra.cluster.deadlines import Liveness
from rl_core.config import ConfigError, RLPipeConfig, load_config

STEP_DEADLINES = (
    "weight_sync",
    "rollout",
    "reward",
    "advantage",
    "update",
    "evaluate",
    "checkpoint",
    "worker_start",
)


def test_every_step_has_a_deadline_and_heartbeats_have_defaults() -> None:
    timeouts = RLPipeConfig().timeouts
    for step in STEP_DEADLINES:
        assert getattr(timeouts, step) >= 60.0, step  # long enough for real steps
    assert timeouts.worker_start == 600.0
    assert (timeouts.heartbeat_interval_s, timeouts.heartbeat_timeout_s) == (5.0, 30.0)
    assert Liveness.from_config(timeouts) == Liveness(interval_s=5.0, timeout_s=30.0)


def test_overrides_set_seconds() -> None:
    cfg = load_config(overrides=["timeouts.rollout=90", "timeouts.heartbeat_timeout_s=7.5"])
    assert cfg.timeouts.rollout == 90.0
    assert cfg.timeouts.heartbeat_timeout_s == 7.5


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "timeouts.rollout = 0: Input should be greater than 0"),
        ("-5", "timeouts.rollout = -5: Input should be greater than 0"),
        ("inf", "timeouts.rollout = 'inf': Input should be a finite number"),
        ("nan", "timeouts.rollout = 'nan': Input should be a finite number"),
        ("soon", "timeouts.rollout = 'soon': Input should be a valid number"),
    ],
)
def test_deadlines_must_be_positive_finite_seconds(value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[f"timeouts.rollout={value}"])
    assert expected in str(info.value)


def test_heartbeat_timeout_must_cover_the_interval() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            overrides=["timeouts.heartbeat_interval_s=10", "timeouts.heartbeat_timeout_s=4"]
        )
    assert (
        "timeouts.heartbeat_timeout_s (4) must be at least timeouts.heartbeat_interval_s (10)"
        in str(info.value)
    )


def test_unknown_timeout_names_the_allowed_fields() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["timeouts.generate=10"])
    assert "timeouts.generate: unknown field; allowed fields here: advantage" in str(info.value)
