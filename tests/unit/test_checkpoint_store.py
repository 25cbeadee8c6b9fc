"""LocalCheckpointStore: a checkpoint is latest only after its files and commit landed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.checkpoint import store as store_module
from infra.checkpoint.location import run_store_uri, split_store_uri
from infra.checkpoint.store import (
    MANIFEST,
    CheckpointError,
    LocalCheckpointStore,
    open_store,
    register_store_scheme,
    step_dir_name,
)
from rl_core.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


def save(store, step, payload=b"weights", commit=True, complete=True, meta=None):
    folder = step_dir_name(step)
    store.write_bytes(f"{folder}/actor_0/model.safetensors", payload)
    store.write_bytes(f"{folder}/env_0/state.pkl", b"env" + payload)
    if complete:
        store.write_bytes(f"{folder}/COMPLETE", b"")
    if commit:
        return store.commit(step, meta or {})
    return None


def test_step_dir_name():
    assert step_dir_name(10) == "step_000010"
    assert step_dir_name(0) == "step_000000"


def test_no_manifest_means_no_checkpoint(tmp_path):
    store = LocalCheckpointStore(tmp_path / "run")
    assert store.latest() is None
    assert not (tmp_path / "run").exists()  # reading creates nothing


def test_commit_makes_latest(tmp_path):
    store = LocalCheckpointStore(tmp_path / "run")
    manifest = save(store, 1, meta={"mlflow_run_id": "abc", "env_steps": 1024})
    assert manifest["step"] == 1 and manifest["dir"] == "step_000001"
    latest = store.latest()
    assert latest == {
        "format": 1,
        "step": 1,
        "dir": "step_000001",
        "mlflow_run_id": "abc",
        "env_steps": 1024,
    }
    assert store.read_bytes(f"{latest['dir']}/actor_0/model.safetensors") == b"weights"
    assert json.loads((tmp_path / "run" / MANIFEST).read_text())["step"] == 1
    # a new store object on the same root sees the same checkpoint
    assert open_store(str(tmp_path / "run")).latest()["step"] == 1
    assert (
        store.local_path("step_000001/COMPLETE")
        == (tmp_path / "run/step_000001/COMPLETE").resolve()
    )


def test_later_commit_replaces_latest(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 1)
    save(store, 2, payload=b"newer")
    latest = store.latest()
    assert latest["step"] == 2 and latest["dir"] == "step_000002"
    assert store.read_bytes("step_000002/actor_0/model.safetensors") == b"newer"
    assert store.read_bytes("step_000001/actor_0/model.safetensors") == b"weights"


def test_uncommitted_folder_is_never_latest(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 1)
    save(store, 2, commit=False, complete=False)
    assert (tmp_path / "step_000002" / "actor_0" / "model.safetensors").is_file()
    assert store.latest()["step"] == 1
    # even a complete but uncommitted folder is not latest
    store.write_bytes("step_000002/COMPLETE", b"")
    assert store.latest()["step"] == 1


def test_crash_mid_write_keeps_previous_latest(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 1)
    store.write_bytes("step_000002/actor_0/model.safetensors", b"half")
    # the process dies here: no env state, no COMPLETE, no commit
    reopened = LocalCheckpointStore(tmp_path)
    latest = reopened.latest()
    assert latest["step"] == 1 and latest["dir"] == "step_000001"
    assert reopened.read_bytes("step_000001/actor_0/model.safetensors") == b"weights"
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temp files


def test_corrupt_manifest_is_an_error(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 1)
    (tmp_path / MANIFEST).write_text('{"step": 1, "dir": ')  # truncated JSON
    with pytest.raises(CheckpointError) as info:
        store.latest()
    msg = str(info.value)
    assert f"{tmp_path.resolve()}/{MANIFEST} is corrupt" in msg
    assert "refusing to resume" in msg


@pytest.mark.parametrize(
    "manifest", [{"dir": "step_000001", "format": 1}, {"step": "x", "dir": "d", "format": 1}, []]
)
def test_manifest_missing_or_bad_fields(tmp_path, manifest):
    store = LocalCheckpointStore(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="is corrupt"):
        store.latest()


def test_unknown_manifest_format(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 1)
    data = json.loads((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(json.dumps({**data, "format": 99}))
    with pytest.raises(CheckpointError, match="has format 99; this rlpipe reads 1"):
        store.latest()


def test_committed_dir_without_complete_marker(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    save(store, 3, complete=False)
    with pytest.raises(CheckpointError) as info:
        store.latest()
    assert f"{tmp_path.resolve()}/step_000003 named by {MANIFEST} is incomplete" in str(info.value)


def test_missing_file_read_is_checkpoint_error(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    with pytest.raises(CheckpointError, match=r"checkpoint file .*nothing\.bin is missing"):
        store.read_bytes("step_000001/nothing.bin")


def test_prune_keeps_latest_requested_and_the_one_being_written(tmp_path):
    store = LocalCheckpointStore(tmp_path)
    for step in (1, 2, 3):
        save(store, step)
    save(store, 4, commit=False)  # being written: no manifest points at it yet
    assert store.checkpoint_steps() == [1, 2, 3, 4]
    assert store.prune(keep_steps={1}) == [2]
    remaining = sorted(p.name for p in tmp_path.glob("step_*"))
    assert remaining == ["step_000001", "step_000003", "step_000004"]
    assert store.latest()["step"] == 3


def test_unknown_scheme_is_a_clear_error():
    with pytest.raises(CheckpointError, match=r"no checkpoint store for 'gs://bucket/run'.*s3://"):
        open_store("gs://bucket/run")


def test_registered_scheme_opens_with_its_factory(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "_SCHEMES", dict(store_module._SCHEMES))
    register_store_scheme("mem", lambda uri: LocalCheckpointStore(tmp_path / uri[6:]))
    store = open_store("mem://run")
    assert isinstance(store, LocalCheckpointStore) and store.root == (tmp_path / "run").resolve()


def test_local_stores_do_not_import_boto3(tmp_path):
    code = (
        "import sys\n"
        "from infra.checkpoint.store import open_store\n"
        f"open_store({str(tmp_path)!r}).latest()\n"
        "assert 'boto3' not in sys.modules, 'boto3 imported for a local store'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_list_files_and_download(tmp_path):
    store = LocalCheckpointStore(tmp_path / "store")
    save(store, 1)
    assert store.list_files("step_000001") == [
        "step_000001/COMPLETE",
        "step_000001/actor_0/model.safetensors",
        "step_000001/env_0/state.pkl",
    ]
    out = store.download("step_000001", tmp_path / "copy")
    assert (out / "actor_0" / "model.safetensors").read_bytes() == b"weights"


def test_run_store_uri_resolution(tmp_path):
    assert run_store_uri(tmp_path, "r") == str(tmp_path.resolve() / "r" / "checkpoints")
    assert run_store_uri(tmp_path, "r", "s3://b/ckpts/") == "s3://b/ckpts/r"
    assert run_store_uri(tmp_path, "r", str(tmp_path / "ck")) == str(tmp_path / "ck" / "r")
    assert split_store_uri("s3://b/ckpts/r/step_000002") == ("s3://b/ckpts/r", "step_000002")
    assert split_store_uri(tmp_path / "x") == (str(tmp_path.resolve()), "x")


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("run.checkpoint_uri", "gs://bucket/x", "expected a local path or s3://bucket/prefix"),
        ("run.checkpoint_uri", "s3://Bad_Bucket/x", "valid bucket name"),
        ("run.checkpoint_uri", "s3://key:secret@bucket/x", "credentials do not belong"),
        ("tracking.artifact_location", "s3://k:s@bucket/mlflow", "credentials do not belong"),
    ],
)
def test_storage_locations_are_validated(field, value, error):
    with pytest.raises(ConfigError, match=error):
        load_config("ppo_cartpole", [f"{field}={value}"])


def test_storage_locations_accepted():
    cfg = load_config(
        "ppo_cartpole",
        ["run.checkpoint_uri=s3://my-bucket/ckpts", "tracking.artifact_location=s3://bk1/mlflow"],
    )
    assert cfg.run.checkpoint_uri == "s3://my-bucket/ckpts"
    assert cfg.tracking.artifact_location == "s3://bk1/mlflow"
    assert load_config("ppo_cartpole", ["run.checkpoint_uri=/mnt/ckpts"]).run.checkpoint_uri
