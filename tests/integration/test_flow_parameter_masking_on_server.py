"""Flow parameters reach the Prefect API with secrets masked; the flow gets the real values.

Runs flows in this process against the test session's Prefect server, as the CLI does.
"""

from __future__ import annotations

from typing import Any

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.runtime import flow_run
from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.masked_flow import masked_flow

pytestmark = pytest.mark.integration
PASSWORD = "pw-9f8e7d6c5b"
TOKEN = "hf_0123456789abcdef"
OVERRIDES = [
    f"tracking.tracking_uri=https://alice:{PASSWORD}@mlflow.example.invalid",
    f"model.hf_token={TOKEN}",
    "run.name=masked",
]
RECEIVED: dict[str, Any] = {}


@masked_flow(name="masked-child", persist_result=False)
def child(overrides: list[str]) -> str:
    RECEIVED["child"] = list(overrides)
    return str(flow_run.id)


@masked_flow(name="masked-parent", persist_result=False)
def parent(overrides: list[str], api_token: str = "") -> dict[str, str]:
    RECEIVED["parent"] = (list(overrides), api_token)
    return {"parent": str(flow_run.id), "child": child(overrides)}


@flow(name="plain-parent", persist_result=False)
def plain(overrides: list[str]) -> str:
    return str(flow_run.id)


def _stored_parameters(api: str, run_id: str) -> dict[str, Any]:
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        return client.read_flow_run(run_id).parameters


def test_stored_flow_run_parameters_hold_no_secret(prefect_api: str) -> None:
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        ids = parent(OVERRIDES, api_token=TOKEN)
        plain_id = plain(OVERRIDES)
        APILogWorker.drain_all(timeout=10)  # before the session's server stops
        EventsWorker.drain_all(timeout=10)

    assert RECEIVED["parent"] == (OVERRIDES, TOKEN)  # the flows ran with the real values
    assert RECEIVED["child"] == OVERRIDES
    for name in ("parent", "child"):
        stored = _stored_parameters(prefect_api, ids[name])
        text = repr(stored)
        assert PASSWORD not in text and TOKEN not in text, (name, stored)
        assert stored["overrides"] == [
            "tracking.tracking_uri=https://***@mlflow.example.invalid",
            "model.hf_token=***",
            "run.name=masked",
        ]
    assert _stored_parameters(prefect_api, ids["parent"])["api_token"] == "***"
    # A plain Prefect flow stores them as given: the masking is what makes the difference.
    assert TOKEN in repr(_stored_parameters(prefect_api, plain_id))
