"""Nothing named by a manifest or a bucket reaches a path outside the run's store."""

from __future__ import annotations

import json

import boto3
import pytest

from infra.checkpoint.reader import locate_checkpoint
from infra.checkpoint.s3_store import s3_endpoint
from infra.checkpoint.store import (
    MANIFEST,
    CheckpointError,
    LocalCheckpointStore,
    check_relpath,
    open_store,
    step_dir_name,
)

ESCAPING_DIRS = ["../x", "/etc", "step_000001/../../x", "step_000001/..", "", ".", "step_000002"]
BAD_RELPATHS = ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", "a/./b", "a\\..\\b", "a\0b", ""]


def committed(store, step=1):
    folder = step_dir_name(step)
    store.write_bytes(f"{folder}/actor_0/model.safetensors", b"weights")
    store.write_bytes(f"{folder}/COMPLETE", b"ok\n")
    return store.commit(step, {"run_name": "r"})


def rewrite_manifest(store, **fields):
    manifest = json.loads(store.read_bytes(MANIFEST))
    store._replace_manifest(json.dumps({**manifest, **fields}).encode())


@pytest.mark.parametrize("folder", ESCAPING_DIRS)
def test_tampered_manifest_dir_is_refused(tmp_path, folder):
    outside = tmp_path / "x"
    (outside / "COMPLETE").parent.mkdir(parents=True)
    (outside / "COMPLETE").write_text("ok\n")  # a "complete checkpoint" outside the store
    store = LocalCheckpointStore(tmp_path / "run" / "checkpoints")
    committed(store)
    rewrite_manifest(store, dir=folder)
    with pytest.raises(CheckpointError) as info:
        store.latest()
    msg = str(info.value)
    assert f"names dir {folder!r} for step 1" in msg and "'step_000001'" in msg
    with pytest.raises(CheckpointError, match="names dir"):
        locate_checkpoint(store.root)


def test_non_string_manifest_dir_is_refused(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    committed(store)
    rewrite_manifest(store, dir=["step_000001"])
    with pytest.raises(CheckpointError, match="names dir"):
        store.latest()


@pytest.mark.parametrize("relpath", BAD_RELPATHS)
def test_every_local_store_operation_checks_the_path(tmp_path, relpath):
    store = LocalCheckpointStore(tmp_path / "store")
    with pytest.raises(CheckpointError, match="is not a path inside a checkpoint store"):
        check_relpath(relpath)
    operations = {
        "write": lambda: store.write_bytes(relpath, b"data"),
        "read": lambda: store.read_bytes(relpath),
        "exists": lambda: store.exists(relpath),
        "local_path": lambda: store.local_path(relpath),
        "list": lambda: store.list_files(relpath),
    }
    for operation in operations.values():
        with pytest.raises(CheckpointError, match="not a path inside"):
            operation()
    assert not (tmp_path / "x").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the store was created


def test_good_paths_pass(tmp_path):
    for relpath in ("latest.json", "step_000001/actor_0/model.safetensors", "step_000001/"):
        assert check_relpath(relpath) == relpath


def test_symbolic_link_out_of_the_store_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not yours")
    store = LocalCheckpointStore(tmp_path / "store")
    committed(store)
    (store.root / "step_000001" / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CheckpointError, match="leads outside the checkpoint store"):
        store.read_bytes("step_000001/linked/secret")
    with pytest.raises(CheckpointError, match="leads outside the checkpoint store"):
        store.write_bytes("step_000001/linked/planted", b"x")
    assert not (outside / "planted").exists()
    # a whole step folder replaced by a link out of the store
    (store.root / "step_000001").rename(store.root / "moved")
    (store.root / "step_000001").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CheckpointError, match="leads outside"):
        store.latest()


def test_download_refuses_links_out_of_the_destination(tmp_path):
    store = LocalCheckpointStore(tmp_path / "store")
    committed(store)
    dest = store.download("step_000001", tmp_path / "copy")
    assert (dest / "actor_0" / "model.safetensors").read_bytes() == b"weights"
    outside = tmp_path / "outside"
    outside.mkdir()
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "actor_0").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CheckpointError, match="would be written outside"):
        store.download("step_000001", trap)
    assert list(outside.iterdir()) == []


# -- S3 ---------------------------------------------------------------------------------------
@pytest.fixture()
def s3(s3_bucket):
    return boto3.client("s3", endpoint_url=s3_endpoint())


@pytest.mark.parametrize(
    "bad_key", ["step_000001//abs/escaped.txt", "step_000001/../../escaped.txt"]
)
def test_s3_download_stays_inside_the_destination(tmp_path, s3_bucket, s3, bad_key):
    store = open_store(f"s3://{s3_bucket}/ckpts/run")
    committed(store)
    s3.put_object(Bucket=s3_bucket, Key=f"ckpts/run/{bad_key}", Body=b"planted")
    listed = store.list_files("step_000001")
    if bad_key not in listed:
        pytest.skip(f"this S3 server normalizes {bad_key!r}")
    dest = tmp_path / "deep" / "er" / "dest"
    with pytest.raises(CheckpointError) as info:
        store.download("step_000001", dest)
    assert f"{store.uri}/{bad_key} would be written outside {dest.resolve()}" in str(info.value)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not dest.exists()  # refused before anything was written
    with pytest.raises(CheckpointError, match="not a path inside"):
        store.read_bytes(bad_key)


def test_s3_folder_markers_are_skipped(tmp_path, s3_bucket, s3):
    store = open_store(f"s3://{s3_bucket}/run")
    committed(store)
    s3.put_object(Bucket=s3_bucket, Key="run/step_000001/actor_0/", Body=b"")
    dest = store.download("step_000001", tmp_path / "dest")
    assert (dest / "actor_0" / "model.safetensors").read_bytes() == b"weights"


def test_s3_manifest_dir_is_confined(s3_bucket):
    store = open_store(f"s3://{s3_bucket}/run")
    committed(store)
    rewrite_manifest(store, dir="../other-run/step_000001")
    with pytest.raises(CheckpointError, match="names dir '../other-run/step_000001'"):
        store.latest()
    with pytest.raises(CheckpointError, match="not a path inside"):
        store.exists("../other-run/step_000001/COMPLETE")
