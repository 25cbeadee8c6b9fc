"""An agent trajectory's MLflow trace, opened in the MLflow UI in a real headless Chromium.

The trace is logged the way a run logs it (``MlflowTracker.log_agent_traces``) into a
store that ``mlflow ui`` serves on 127.0.0.1; the run's Traces tab must list it, and its
span tree must show the model turns and the tool call. The screenshot goes to
``outputs/ui-screenshots/mlflow-agent-trace.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.tracking.mlflow_tracker import MlflowTracker, mlflow_run_url
from tests.browser import chromium, click_text, screenshot, wait_for
from tests.browser import mlflow_ui as serve_mlflow_ui

pytestmark = pytest.mark.integration

ROW = {
    "row": 0,
    "prompt": "682*72=",
    "answer": "49104",
    "completion": "<call>calculator: 682*72</call><result>49104</result>#### 49104",
    "score": 0.9,
    "finish_reason": "eos",
    "turns": [
        {
            "role": "model",
            "text": "<call>calculator: 682*72</call>",
            "tokens": 31,
            "started": 100.0,
            "ended": 100.5,
            "index": 0,
        },
        {"role": "tool", "text": "<result>49104</result>", "tokens": 21},
        {
            "role": "model",
            "text": "#### 49104",
            "tokens": 9,
            "started": 100.6,
            "ended": 100.9,
            "index": 1,
        },
    ],
    "tool_calls": [
        {
            "name": "calculator",
            "arguments": "682*72",
            "outcome": "ok",
            "latency_s": 0.05,
            "detail": "",
            "turn": 0,
            "attempts": 1,
        }
    ],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MlflowTracker]:
    out = tmp_path_factory.mktemp("traces")
    tracker = MlflowTracker(f"sqlite:///{out / 'mlflow.db'}", "agent-calc", "agent-calc")
    tracker.log_agent_traces([ROW], step=4)
    tracker.finish()
    return out, tracker


@pytest.fixture(scope="module")
def mlflow_ui(store: tuple[Path, MlflowTracker]) -> Iterator[str]:
    """``mlflow ui`` on 127.0.0.1 over the store."""
    with serve_mlflow_ui(store[0]) as url:
        yield url


def test_the_runs_traces_tab_shows_the_trajectory_turn_by_turn(
    store: tuple[Path, MlflowTracker], mlflow_ui: str
) -> None:
    _, tracker = store
    run_page = mlflow_run_url(mlflow_ui, tracker.experiment_id, tracker.run_id)
    traces_tab = run_page.replace("?", "/traces?")  # the run page's Traces tab
    with chromium() as browser:
        browser.get(traces_tab)
        wait_for(browser, lambda t: '"682*72="' in t, "the run's trace list")
        click_text(browser, '{ "prompt": "682*72=" }')
        text = wait_for(
            browser,
            lambda t: "tool:calculator" in t and "generate" in t and "trajectory" in t,
            "the trace's spans (model turns and the tool call)",
        )
        assert "49104" in text
        screenshot(browser, "mlflow-agent-trace")
