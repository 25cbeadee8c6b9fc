"""The CLI stops with exit code 2 and one clear line before any server or worker starts."""

from __future__ import annotations

import importlib.util
import json

import pytest

from flows.cli import run_cli
from rl_core.models.tiny_lm import create_tiny_lm


def never_called(**kwargs):
    raise AssertionError("the flow must not start")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("cli") / "tiny")


def reasoning_args(tmp_path, tiny, *extra):
    return [
        "--config",
        "grpo_arith",
        "run.warm_start=null",
        f"model.model_path={tiny}",
        f"run.output_dir={tmp_path / 'out'}",
        *extra,
    ]


def test_vllm_engine_without_vllm(tmp_path, tiny, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    code = run_cli(never_called, reasoning_args(tmp_path, tiny, "rollout.engine=vllm"))
    err = capsys.readouterr().err
    assert code == 2
    assert "rollout.engine = 'vllm'" in err and "setup_vllm_cpu.sh" in err
    assert not (tmp_path / "out").exists()


def test_malformed_rows_stop_the_run_naming_file_and_line(tmp_path, tiny, capsys):
    data = tmp_path / "train.jsonl"
    rows = [json.dumps({"prompt": "1+1=", "answer": "2"}), "{not json", json.dumps({"q": 1})]
    data.write_text("\n".join(rows) + "\n")
    args = reasoning_args(tmp_path, tiny, "data.source=files", f"data.train_files=[{data}]")
    code = run_cli(never_called, args)
    err = capsys.readouterr().err
    assert code == 2
    assert "train.jsonl:2" in err
    assert not (tmp_path / "out").exists()
