"""Secrets never reach MLflow params, config artifacts, logs or error messages."""

from __future__ import annotations

import json
import logging

import pytest

from infra.tracking import flatten_config
from infra.tracking.secrets import (
    MASK,
    RedactingFilter,
    install_log_redaction,
    is_secret_name,
    redact_config,
    redact_exception,
    redact_text,
    redacted_json_files,
    secret_env_values,
    url_without_credentials,
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
            "model.extra.endpoint=https://user:pw@example.invalid/x?k=s3cr3t-value-123",
        ],
    )
    params = flatten_config(cfg.model_dump(mode="json"))
    assert params["rollout.max_new_tokens"] == str(cfg.rollout.max_new_tokens)
    assert params["model.hf_token"] == MASK
    text = json.dumps(params)
    assert "hf_abcdefgh" not in text and "s3cr3t-value-123" not in text and ":pw@" not in text
    assert params["model.extra.endpoint"] == '"https://***@example.invalid/x?k=***"'


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


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (
            "tracking.tracking_uri=https://user:pw@host/x",
            "tracking.tracking_uri=https://***@host/x",
        ),
        ("https://h/p?access_token=abc123&x=1", "https://h/p?access_token=***&x=1"),
        ("https://h/b?sv=2020&sig=AbC%2Fd%3D&se=2", "https://h/b?sv=2020&sig=***&se=2"),
        ("https://h/?token=abc&key=AIza123", "https://h/?token=***&key=***"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Signature=deadbeef&X-Amz-Security-Token=zz",
            "https://b.s3.amazonaws.com/k?X-Amz-Signature=***&X-Amz-Security-Token=***",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acc;AccountKey=a+b/==;EndpointSuffix=x",
            "DefaultEndpointsProtocol=https;AccountName=acc;AccountKey=***;EndpointSuffix=x",
        ),
        ("host=db user=bob password=hunter2 dbname=x", "host=db user=bob password=*** dbname=x"),
        ("Server=tcp:x;Pwd=s3cret;", "Server=tcp:x;Pwd=***;"),
        (
            "AWS_SECRET_ACCESS_KEY=abc/def+g STRIPE_KEY=xyz",
            "AWS_SECRET_ACCESS_KEY=*** STRIPE_KEY=***",
        ),
        ("export DB_PASSWORD='p w d'", "export DB_PASSWORD='***'"),
        ("{'hf_token': 'hf_abc', 'max_new_tokens': 5}", "{'hf_token': '***', 'max_new_tokens': 5}"),
        ('{"password": "p@ss word", "user": "u"}', '{"password": "***", "user": "u"}'),
        ("stopping: token=abc", "stopping: token=***"),
        ("Authorization: Bearer eyJhbGciOi.xyz", "Authorization: Bearer ***"),
    ],
)
def test_redact_text_masks_credentials_in_uris_assignments_and_headers(
    text: str, masked: str
) -> None:
    assert redact_text(text, []) == masked


@pytest.mark.parametrize(
    "text",
    [
        "data.prompt_key=question rollout.max_new_tokens=8 tokenizer.pad_token_id=0",
        "http://127.0.0.1:5000/#/experiments/1/runs/abc",
        "key: value, monkey=3, s3://bucket/ckpts/run",
        "iter 3/10 | env steps 3072 | return 41.2 | orch 95 ms",
    ],
)
def test_redact_text_leaves_ordinary_text_alone(text: str) -> None:
    assert redact_text(text, []) == text


def test_links_drop_the_login_and_foreign_files_keep_their_text() -> None:
    assert url_without_credentials("https://u:p@h:5000/x?token=t") == "https://h:5000/x?token=***"
    template = {"chat_template": "{{ 'password: ' + message }}", "note": "key=abc"}
    assert redact_config(template, [], by_key=False) == template  # not ours: left intact
    assert redact_config({"note": "token=abc"}, []) == {"note": "token=***"}


def test_redact_exception_masks_the_chain_in_place() -> None:
    try:
        try:
            raise OSError(2, "no such file", "https://u:pw@h/f")
        except OSError as inner:
            raise RuntimeError("cannot open https://u:pw@h/f?sig=abcdef") from inner
    except RuntimeError as exc:
        assert redact_exception(exc) is exc
        assert str(exc) == "cannot open https://***@h/f?sig=***"
        assert "pw" not in str(exc.__cause__) and exc.__cause__.filename == "https://***@h/f"


def test_log_records_are_masked_when_created(monkeypatch) -> None:
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())
    monkeypatch.setenv("HF_TOKEN", "hf_environment_value")
    install_log_redaction()
    install_log_redaction()  # idempotent: one wrapper
    factory = logging.getLogRecordFactory()
    assert factory.redacting and factory.__closure__ is not None
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("rlpipe.test.child")  # a child logger: masked all the same
    log.addHandler(handler)
    try:
        log.warning("store %s token %s", "https://u:pw@h", "hf_environment_value")
        try:
            raise ValueError("bad url https://u:pw@h")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    assert records[0].getMessage() == "store https://***@h token ***"
    assert str(records[1].exc_info[1]) == "bad url https://***@h"


def test_a_redacting_filter_keeps_every_record() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "password=%s", ("secret1",), None)
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "password=***"
