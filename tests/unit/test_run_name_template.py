"""A scheduled deployment's run_name names a new run per scheduled time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from rl_core.config import ConfigError
from rl_core.config.run_name_template import expand_run_name

NIGHT = datetime(2026, 11, 28, 2, 30, tzinfo=UTC)


def test_placeholders_take_the_scheduled_start_in_utc() -> None:
    assert expand_run_name("grpo-arith-{scheduled_date}", NIGHT) == "grpo-arith-20261128"
    assert expand_run_name("nightly-{scheduled_time}", NIGHT) == "nightly-20261128-0230"
    paris = NIGHT.astimezone(timezone(timedelta(hours=1)))
    assert expand_run_name("n-{scheduled_time}", paris) == "n-20261128-0230"
    assert expand_run_name("fixed-name", NIGHT) == "fixed-name"
    seconds = NIGHT + timedelta(seconds=40)  # a schedule of less than a minute
    assert expand_run_name("t-{scheduled_timestamp}", seconds) == "t-20261128-023040"
    next_night = NIGHT + timedelta(days=1)  # two scheduled runs, two runs
    assert expand_run_name("n-{scheduled_date}", next_night) != expand_run_name(
        "n-{scheduled_date}", NIGHT
    )


def test_an_unknown_placeholder_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown placeholder \{date\}.*\{scheduled_date\}"):
        expand_run_name("run-{date}", NIGHT)
    with pytest.raises(ConfigError, match="placeholders"):
        expand_run_name("run-{", NIGHT)
