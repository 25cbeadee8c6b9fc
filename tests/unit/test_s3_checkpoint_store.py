"""S3CheckpointStore against a real S3-compatible server (moto_server on 127.0.0.1)."""

import json

import boto3
import pytest

from infra.checkpoint.reader import locate_checkpoint
from infra.checkpoint.s3_store import S3CheckpointStore, parse_s3_uri, s3_endpoint
from infra.checkpoint.store import MANIFEST, CheckpointError, open_store, step_dir_name
from tests.env_vars import unset


def save(store, step, payload=b"weights", complete=True, commit=True):
    folder = step_dir_name(step)
    store.write_bytes(f"{folder}/actor_0/model.safetensors", payload)
    store.write_bytes(f"{folder}/config.json", b"{}")
    if complete:
        store.write_bytes(f"{folder}/COMPLETE", b"ok\n")
    return store.commit(step, {"run_name": "r"}) if commit else None


@pytest.fixture()
def s3(s3_bucket):
    return boto3.client("s3", endpoint_url=s3_endpoint())


def keys(s3, bucket, prefix=""):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_open_store_dispatches_s3(s3_bucket):
    store = open_store(f"s3://{s3_bucket}/ckpts/run/")
    assert isinstance(store, S3CheckpointStore)
    assert store.uri == f"s3://{s3_bucket}/ckpts/run"
    assert store.local_path("step_000001") is None


def test_parse_s3_uri():
    assert parse_s3_uri("s3://b/a/b/") == ("b", "a/b")
    assert parse_s3_uri("s3://b") == ("b", "")
    with pytest.raises(CheckpointError, match="names no bucket"):
        parse_s3_uri("s3:///x")


def test_write_read_exists_list(s3_bucket, s3):
    store = open_store(f"s3://{s3_bucket}/ckpts/run")
    assert not store.exists("step_000001/COMPLETE")
    store.write_bytes("step_000001/actor_0/model.safetensors", b"\x00\x01weights")
    assert store.exists("step_000001/actor_0/model.safetensors")
    assert store.read_bytes("step_000001/actor_0/model.safetensors") == b"\x00\x01weights"
    assert keys(s3, s3_bucket) == ["ckpts/run/step_000001/actor_0/model.safetensors"]
    assert store.list_files("step_000001") == ["step_000001/actor_0/model.safetensors"]
    assert store.list_files("step_000002") == []


def test_missing_key_names_the_uri(s3_bucket):
    store = open_store(f"s3://{s3_bucket}/run")
    with pytest.raises(
        CheckpointError, match=rf"s3://{s3_bucket}/run/step_000001/x\.pt is missing"
    ):
        store.read_bytes("step_000001/x.pt")


def test_commit_writes_the_manifest_last(s3_bucket, s3):
    store = open_store(f"s3://{s3_bucket}/run")
    save(store, 2, commit=False)
    assert store.latest() is None  # files and COMPLETE alone are not a checkpoint
    manifest = store.commit(2, {"mlflow_run_id": "abc"})
    assert store.latest() == manifest
    stored = json.loads(s3.get_object(Bucket=s3_bucket, Key=f"run/{MANIFEST}")["Body"].read())
    assert stored["step"] == 2 and stored["dir"] == "step_000002"
    assert stored["mlflow_run_id"] == "abc"


def test_crash_before_commit_keeps_previous_latest(s3_bucket):
    store = open_store(f"s3://{s3_bucket}/run")
    save(store, 1)
    save(store, 2, payload=b"new", commit=False)
    assert store.latest()["step"] == 1


def test_latest_refuses_incomplete_or_corrupt_manifest(s3_bucket):
    store = open_store(f"s3://{s3_bucket}/run")
    save(store, 1, complete=False, commit=False)
    store.commit(1, {})
    with pytest.raises(CheckpointError, match="step_000001 named by latest.json is incomplete"):
        store.latest()
    store.write_bytes(MANIFEST, b"{not json")
    with pytest.raises(CheckpointError, match=rf"s3://{s3_bucket}/run/latest.json is corrupt"):
        store.latest()


def test_download_and_locate_checkpoint(s3_bucket, tmp_path):
    store = open_store(f"s3://{s3_bucket}/ckpts/run")
    save(store, 3)
    out = store.download("step_000003", tmp_path / "copy")
    assert (out / "actor_0" / "model.safetensors").read_bytes() == b"weights"
    assert (out / "COMPLETE").is_file()
    ref = locate_checkpoint(f"s3://{s3_bucket}/ckpts/run")
    assert (ref.step, ref.location) == (3, f"s3://{s3_bucket}/ckpts/run/step_000003")
    one = locate_checkpoint(f"s3://{s3_bucket}/ckpts/run/step_000003")
    assert one.store.uri == f"s3://{s3_bucket}/ckpts/run" and one.step == 3


def test_missing_bucket_is_a_clear_error(s3_bucket):
    store = open_store("s3://no-such-bucket-rlpipe/ckpts/run")
    with pytest.raises(
        CheckpointError, match=r"bucket 'no-such-bucket-rlpipe' of .* does not exist"
    ):
        store.latest()
    with pytest.raises(CheckpointError, match="no-such-bucket-rlpipe.*does not exist"):
        store.write_bytes("step_000001/COMPLETE", b"ok")


def test_missing_credentials_are_a_clear_error(s3_bucket, monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = open_store(f"s3://{s3_bucket}/run")
    with pytest.raises(
        CheckpointError, match=rf"no usable AWS credentials for s3://{s3_bucket}/run"
    ):
        store.read_bytes(MANIFEST)


def test_endpoint_variables_in_order(monkeypatch):
    for key in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "MLFLOW_S3_ENDPOINT_URL"):
        unset(monkeypatch, key)
    assert s3_endpoint() is None
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", "http://mlflow")
    assert s3_endpoint() == "http://mlflow"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://aws")
    assert s3_endpoint() == "http://aws"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3")
    assert s3_endpoint() == "http://s3"


def test_prune_deletes_old_step_folders_in_the_bucket(s3_bucket, s3):
    store = open_store(f"s3://{s3_bucket}/ckpts/run")
    for step in (1, 2, 3):
        save(store, step)
    save(store, 4, commit=False)  # being written
    assert store.checkpoint_steps() == [1, 2, 3, 4]
    assert store.prune(keep_steps={2}) == [1]
    folders = {key.split("/")[2] for key in keys(s3, s3_bucket, "ckpts/run/step_")}
    assert folders == {"step_000002", "step_000003", "step_000004"}
    assert store.latest()["step"] == 3
