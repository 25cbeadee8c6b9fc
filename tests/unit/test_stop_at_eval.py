"""Stopping targets of evaluations: ``run.stop_at_eval_return`` and ``run.stop_at_eval_success``."""

from __future__ import annotations

import pytest

from flows.iteration import reached
from rl_core.config import load_config
from rl_core.config.loader import ConfigError


def test_a_target_is_reached_at_or_above_it_and_never_without_a_value():
    assert reached(0.9, 0.9) and reached(0.9, 1.0)
    assert not reached(0.9, 0.875)
    assert not reached(None, 1.0)  # no target set
    assert not reached(0.9, None)  # an env that reports no success


def test_the_success_target_is_a_rate():
    cfg = load_config("ppo_metaworld", ["run.stop_at_eval_success=0.9"])
    assert cfg.run.stop_at_eval_success == 0.9
    with pytest.raises(ConfigError, match="run.stop_at_eval_success"):
        load_config("ppo_metaworld", ["run.stop_at_eval_success=90"])
