"""How a sweep reads the end of a run it started as a deployment run."""

from __future__ import annotations

import pytest
from prefect.states import Cancelled, Completed, Crashed, Failed, Running

from flows.sweep_children import check_deployment, exit_code_of
from rl_core.config import ConfigError


def test_only_a_completed_deployment_run_counts_as_finished():
    assert exit_code_of(Completed()) == 0
    for state in (Failed(), Crashed(), Cancelled(), Running(), None):
        assert exit_code_of(state) == 1, state


def test_a_deployment_name_without_its_flow_fails_before_any_api_call():
    with pytest.raises(ConfigError, match="expected flow/deployment, e.g. train/train-ppo"):
        check_deployment("train-ppo-cartpole")
