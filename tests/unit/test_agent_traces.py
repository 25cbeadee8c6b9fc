"""Agent trajectories become MLflow traces of the run: a span per turn and per tool call."""

from __future__ import annotations

import os

import mlflow
import numpy as np
from mlflow.tracking import MlflowClient

from infra.tracking.mlflow_tracker import MlflowTracker
from kinds.reasoning.agent_traces import trace_rows
from kinds.reasoning.responses import ResponseBatch
from rl_core.data import PromptSample


class Bytes:
    """A byte-level tokenizer's decode."""

    @staticmethod
    def decode(ids, skip_special_tokens=True):
        return bytes(ids).decode()


def batch() -> ResponseBatch:
    text = [b"<call>calculator: 12*34</call>", b"<result>408</result>", b"#### 408"]
    ids = [i for part in text for i in part]
    a, b = len(text[0]), len(text[0]) + len(text[1])
    call = {
        "name": "calculator",
        "arguments": "12*34",
        "outcome": "ok",
        "latency_s": 0.25,
        "detail": "",
        "turn": 0,
        "attempts": 1,
    }
    summary = {
        "turn_spans": [[0, a, 1], [a, b, 0], [b, len(ids), 1]],
        "num_turns": 2,
        "num_tool_calls": 1,
        "masked_fraction": (b - a) / len(ids),
        "infra_failed": False,
        "finish_reason": "eos",
        "generation_times": [[100.0, 100.5], [101.0, 101.25]],
        "tool_calls": [call],
    }
    plain = {**summary, "turn_spans": [[0, 8, 1]], "num_turns": 1, "num_tool_calls": 0}
    plain.update(tool_calls=[], generation_times=[[100.0, 100.4]])
    return ResponseBatch(
        samples=[PromptSample("12*34=", "408"), PromptSample("1+2=", "3")],
        prompt_ids=[list(b"12*34="), list(b"1+2=")],
        response_ids=[ids, list(b"#### 3")],
        finished=[True, True],
        group_index=[0, 0],
        scores=np.asarray([0.9, np.nan], dtype=np.float32),
        trajectories=[summary, plain],
    )


def test_trace_rows_decode_each_turn_and_pick_the_same_rows():
    rows = trace_rows(batch(), Bytes(), 1)
    assert [r["row"] for r in rows] == [0]
    (row,) = rows
    assert [t["role"] for t in row["turns"]] == ["model", "tool", "model"]
    assert row["turns"][1]["text"] == "<result>408</result>"
    assert row["turns"][2]["started"] == 101.0 and row["score"] == np.float32(0.9)
    both = trace_rows(batch(), Bytes(), 5)
    assert [r["row"] for r in both] == [0, 1] and both[1]["score"] is None  # unscored
    assert trace_rows(ResponseBatch(), Bytes(), 3) == []


def test_traces_are_logged_under_the_run_with_a_span_per_turn_and_call(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    elsewhere = f"sqlite:///{tmp_path / 'other.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", elsewhere)  # the user's global URI is left alone
    tracker = MlflowTracker(uri, "agents", "run-with-traces")
    tracker.log_agent_traces(trace_rows(batch(), Bytes(), 2), step=3)
    assert os.environ["MLFLOW_TRACKING_URI"] == elsewhere
    assert mlflow.get_tracking_uri() == elsewhere
    client = MlflowClient(uri)
    traces = client.search_traces(locations=[tracker.experiment_id], run_id=tracker.run_id)
    assert len(traces) == 2
    spans = {t.info.trace_id: t.data.spans for t in traces}
    tool_trace = next(s for s in spans.values() if len(s) == 4)
    names = [s.name for s in tool_trace]
    assert names[0] == "trajectory" and sorted(names[1:]) == [
        "generate",
        "generate",
        "tool:calculator",
    ]
    tool = next(s for s in tool_trace if s.name == "tool:calculator")
    assert tool.attributes["outcome"] == "ok" and tool.attributes["latency_s"] == 0.25
    assert tool.inputs == {"arguments": "12*34"}
    assert (tool.end_time_ns - tool.start_time_ns) == 250_000_000
    assert all(t.info.tags["rlpipe.iteration"] == "3" for t in traces)
    tracker.finish()
