"""What the train and SFT flows send Prefect as their parameters: secrets masked."""

from __future__ import annotations

import logging

import pytest

from flows import masked_flow
from flows.sft import sft
from flows.train import train

SECRET_OVERRIDES = [
    "tracking.tracking_uri=https://alice:pw-123456@mlflow.example.invalid",
    "model.hf_token=hf_0123456789",
    "actor.lr=1e-3",
]
MASKED_OVERRIDES = [
    "tracking.tracking_uri=https://***@mlflow.example.invalid",
    "model.hf_token=***",
    "actor.lr=1e-3",
]


@pytest.mark.parametrize("flow", [train, sft, train.with_options(name="train-copy")])
def test_train_and_sft_flows_mask_their_parameters(flow) -> None:
    parameters = {"preset": "ppo_cartpole", "overrides": SECRET_OVERRIDES, "run_name": "r"}
    serialized = flow.serialize_parameters(parameters)
    assert serialized == {"preset": "ppo_cartpole", "overrides": MASKED_OVERRIDES, "run_name": "r"}
    assert parameters["overrides"] == SECRET_OVERRIDES  # the caller's values are untouched


def test_deployment_runs_with_secret_parameters_are_warned_about(monkeypatch, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="rlpipe.parameters")
    masked_flow.warn_if_secret_parameters({"overrides": SECRET_OVERRIDES})
    assert not caplog.records  # not a deployment run: the CLI masks them itself

    monkeypatch.setattr(masked_flow, "current_deployment_id", lambda: "dep-1")
    masked_flow.warn_if_secret_parameters({"overrides": ["actor.lr=1e-3"], "run_name": "r"})
    assert not caplog.records  # nothing secret
    masked_flow.warn_if_secret_parameters({"overrides": SECRET_OVERRIDES, "run_name": "r"})
    (record,) = caplog.records
    message = record.getMessage()
    assert "model.hf_token=***" in message and "worker's environment" in message
    assert "hf_0123456789" not in message and "pw-123456" not in message
