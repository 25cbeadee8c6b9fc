"""Gated promotion end to end: a short CartPole run registers (``tracking.promotion=gated``),
the promote flow compares it with a weak ``best`` on the held-out episodes, and ``best``
moves either at once (auto-approve) or after the approval form is submitted in the Prefect
UI, driven in a real headless Chromium (screenshot ``prefect-promotion-approval.png``)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import httpx
import pytest
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, temporary_settings
from selenium.webdriver.common.by import By

from infra.tracking.model_registry import BEST_ALIAS, NEWEST_ALIAS, register_version
from tests.browser import chromium, click_text, screenshot, wait_for
from tests.constant_policy import register_constant_policy
from tests.integration.conftest import (
    CARTPOLE_MODEL,
    ROOT,
    SMALL_RUN,
    kill_process_group,
    start_process,
)

pytestmark = pytest.mark.integration
RUN = SMALL_RUN
MODEL = CARTPOLE_MODEL


@pytest.fixture(scope="module")
def registered(small_cartpole_run: dict[str, Any]) -> dict[str, Any]:
    """The session's small run: version 2 registered gated, the constant baseline ``best``."""
    client = small_cartpole_run["client"]
    newest = client.get_model_version_by_alias(MODEL, NEWEST_ALIAS)
    assert str(newest.version) == "2"
    assert str(client.get_model_version_by_alias(MODEL, BEST_ALIAS).version) == "1"  # gated
    return {**small_cartpole_run, "newest": newest}


def test_auto_approve_moves_best_and_tags_the_version(
    registered: dict[str, Any], prefect_api: str
) -> None:
    from flows.promote import promote

    client, newest, name = registered["client"], registered["newest"], "rlpipe-auto"
    register_constant_policy(client, registered["out"], name)
    source_path = newest.source.split("/artifacts/", 1)[1]
    register_version(client, name, newest.run_id, source_path, None, move_best=False)
    overrides = [
        f"run.output_dir={registered['out']}",
        f"tracking.tracking_uri={registered['uri']}",
    ]
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        summary = promote(model_name=name, overrides=overrides, auto_approve=True)
    assert summary["outcome"] == "auto_approved", summary
    assert summary["newest_score"] > summary["best_score"]
    assert str(client.get_model_version_by_alias(name, BEST_ALIAS).version) == "2"
    tags = client.get_model_version(name, "2").tags
    assert tags["promotion"] == "auto_approved" and tags["promoted_from_version"] == "1"
    assert float(tags["promotion_score"]) == summary["newest_score"]
    assert tags["promotion_flow_run"] not in ("", "-")


def _paused_flow_run(prefect_api: str, proc: Any, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"promote exited early with {proc.returncode}"
            for run in api.read_flow_runs():
                if run.name == f"promote-{MODEL}" and run.state and run.state.is_paused():
                    return str(run.id)
            time.sleep(1)
    raise AssertionError(f"no paused promote flow run within {timeout}s")


def test_the_promotion_pause_is_approved_through_the_ui_form(
    registered: dict[str, Any], prefect_api: str
) -> None:
    out, client = registered["out"], registered["client"]
    log = out / "promote.log"
    cmd = [
        sys.executable,
        str(ROOT / "flows" / "promote.py"),
        "--model",
        MODEL,
        f"run.output_dir={out}",
        "tracking.promotion_approval_timeout=180",
    ]
    proc = start_process(cmd, registered["env"], log)
    try:
        flow_run_id = _paused_flow_run(prefect_api, proc)
        with chromium() as browser:
            browser.get(f"{prefect_api.removesuffix('/api')}/runs/flow-run/{flow_run_id}")
            wait_for(browser, lambda t: "Paused" in t and "Resume" in t, "the paused flow run")
            click_text(browser, "Resume")
            # the form: both scores and the episodes (the description), then the fields
            wait_for(browser, lambda t: "newest wins" in t and "Approve" in t, "the form")
            field = "//*[normalize-space(.)='{}']/following::{}[1]"
            switch = browser.find_element(By.XPATH, field.format("Approve (Optional)", "input"))
            browser.execute_script("arguments[0].click();", switch)
            assert switch.is_selected(), "the Approve switch did not turn on"
            note = browser.find_element(By.XPATH, field.format("Note (Optional)", "textarea"))
            note.send_keys("approved in the browser test")
            screenshot(browser, "prefect-promotion-approval")
            click_text(browser, "Submit")
            proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            kill_process_group(proc)
    output = log.read_text()
    assert proc.returncode == 0, output[-4000:]
    summary = json.loads(output[output.rindex("{\n") :])
    assert summary["outcome"] == "approved" and summary["promoted"], summary
    assert str(client.get_model_version_by_alias(MODEL, BEST_ALIAS).version) == "2"
    tags = client.get_model_version(MODEL, "2").tags
    assert tags["promotion"] == "approved"
    assert tags["promotion_note"] == "approved in the browser test"
    assert tags["promotion_flow_run"] == flow_run_id


def test_registration_emits_the_event_the_promote_trigger_expects(
    registered: dict[str, Any], prefect_api: str
) -> None:
    from tasks.register_model import REGISTERED_EVENT

    body = {"filter": {"event": {"name": [REGISTERED_EVENT]}}, "limit": 50}
    deadline, ours = time.monotonic() + 30, []
    while not ours and time.monotonic() < deadline:
        response = httpx.post(f"{prefect_api}/events/filter", json=body, timeout=10)
        response.raise_for_status()
        ours = [e for e in response.json()["events"] if e["payload"].get("run_name") == RUN]
        time.sleep(0.5)
    (event,) = ours
    assert event["resource"]["prefect.resource.id"] == f"mlflow.model.{MODEL}"
    assert event["resource"]["rlpipe.model"] == MODEL
    assert event["resource"]["rlpipe.model.version"] == "2"
