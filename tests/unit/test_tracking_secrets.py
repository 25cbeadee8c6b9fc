"""Secrets never reach MLflow params or config artifacts (redaction rules)."""

from __future__ import annotations

import json

import pytest

from infra.tracking import flatten_config
from infra.tracking.secrets import (
    MASK,
    is_secret_name,
    redact_config,
    redact_text,
    redacted_json_files,
    secret_env_values,
)
from rl_core.config import load_config


@pytest.mark.parametrize(
    "name",
    [
        "hf_token",
        "token",
        "model.api_token",
        "AWS_SECRET_ACCESS_KEY",
        "aws_access_key_id",
        "HF_TOKEN",
        "MLFLOW_TRACKING_PASSWORD",
        "api_key",
        "apikey",
        "credentials",
        "private_key",
        "db-password",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "rollout.max_new_tokens",
        "pad_token_id",
        "eos_token_ids",
        "train/tokens_per_second",
        "tokenizer",
        "author",
        "key",
        "monkey",
    ],
)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_flatten_config_keeps_max_new_tokens_and_masks_tokens(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-123")
    cfg = load_config(
        "grpo_arith",
        [
            "model.hf_token=hf_abcdefgh",
            "env.kwargs.endpoint=https://user:pw@example.invalid/x?k=s3cr3t-value-123",
        ],
    )
    params = flatten_config(cfg.model_dump(mode="json"))
    assert params["rollout.max_new_tokens"] == str(cfg.rollout.max_new_tokens)
    assert params["model.hf_token"] == MASK
    text = json.dumps(params)
    assert "hf_abcdefgh" not in text and "s3cr3t-value-123" not in text and ":pw@" not in text
    assert params["env.kwargs.endpoint"] == '"https://***@example.invalid/x?k=***"'


def test_secret_env_values_skip_short_and_ordinary_variables() -> None:
    env = {"HF_TOKEN": "hf_longvalue", "GITHUB_TOKEN": "abc", "HOME": "/root/secretive"}
    assert secret_env_values(env) == ["hf_longvalue"]
    assert redact_text("x hf_longvalue y", ["hf_longvalue"]) == "x *** y"


def test_redact_config_nested_and_by_key_switch() -> None:
    tree = {"a": {"credentials": {"user": "u"}, "list": ["ok", "the-secret-value"]}, "n": 3}
    out = redact_config(tree, ["the-secret-value"])
    assert out == {"a": {"credentials": MASK, "list": ["ok", MASK]}, "n": 3}
    tokenizer = {"bos_token": "<s>", "eos_token": "</s>"}
    assert redact_config(tokenizer, [], by_key=False) == tokenizer


def test_redacted_json_files(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_very_secret")
    (tmp_path / "config.json").write_text(json.dumps({"model": {"api_key": "k-123456"}}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.json").write_text(json.dumps({"note": "hf_very_secret"}))
    (tmp_path / "bad.json").write_text("not json")
    out = redacted_json_files(tmp_path)
    assert set(out) == {"config.json", "sub/x.json"}
    assert "k-123456" not in out["config.json"] and "hf_very_secret" not in out["sub/x.json"]
    assert redacted_json_files(tmp_path, config_files=()) == {"sub/x.json": out["sub/x.json"]}
