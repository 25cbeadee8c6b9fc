"""The checkpoint layout: its names, the one write/read routine, and the walk over the parts
a runtime declares (order of saving, loading and committing; refusals before any load)."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from infra.checkpoint import layout, reader, signing
from infra.checkpoint.commit import commit_checkpoint, driver_parts, restore_driver
from infra.checkpoint.layout import (
    JSON,
    SAFETENSORS,
    SIGNED_WORKERS,
    TORCH,
    TORCH_DATA,
    StatePart,
    actor_file,
    read_file,
    state_dict_part,
    write_file,
)
from infra.checkpoint.parts import SaveOrder, WorkerPart, load_parts, save_parts
from infra.checkpoint.serialize import object_to_bytes, tensors_to_bytes, wrap_bytes
from infra.checkpoint.store import CheckpointError, LocalCheckpointStore
from infra.checkpoint.worker_state import encode_workers_state
from infra.driver.step_runtime import StepRuntime
from rl_core.config import load_config
from tests.poison import poisoned_pickle

FOLDER = "step_000002"


@pytest.fixture(autouse=True)
def key_path(tmp_path, monkeypatch):
    """A key file of this test (signatures are this user's)."""
    path = tmp_path / "keys" / "mine.key"
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(path))
    return path


class FakeGroup:
    """A worker group whose ranks write one file each and log every call."""

    def __init__(self, name: str, log: list[tuple[str, ...]], refuse: bool = False) -> None:
        self.name, self.log, self.refuse = name, log, refuse

    def __getitem__(self, rank: int) -> str:
        return f"{self.name}[{rank}]"

    def _save(self, store_uri: str, folder: str) -> list[dict[str, Any]]:
        if self.refuse:
            raise CheckpointError(f"{self.name} refuses to save")
        write_file(LocalCheckpointStore(store_uri), folder, f"{self.name}/x.json", JSON, 1)
        return [{"version": 7}]

    @property
    def save_checkpoint(self) -> FakeMethod:
        return FakeMethod(self, "save_checkpoint")

    @property
    def load_checkpoint(self) -> FakeMethod:
        return FakeMethod(self, "load_checkpoint")


class FakeMethod:
    """A worker method of a :class:`FakeGroup`, called or started like a group's."""

    def __init__(self, group: FakeGroup, name: str) -> None:
        self.group, self.name = group, name

    def remote(self, store_uri: str, folder: str) -> FakeHandle:
        self.group.log.append(("start", self.group.name, self.name))
        return FakeHandle(self.group, store_uri, folder)

    def __call__(self, *args: Any, within: tuple[str, float | None]) -> list[Any]:
        self.group.log.append((self.name, self.group.name))
        if self.name == "save_checkpoint":
            return self.group._save(*args)
        return [{"loaded": True}]


class FakeHandle:
    """A started ``save_checkpoint``: its ranks save when waited for."""

    def __init__(self, group: FakeGroup, store_uri: str, folder: str) -> None:
        self.group, self.args = group, (store_uri, folder)

    def get(self, within: tuple[str, float | None]) -> list[Any]:
        self.group.log.append(("wait", self.group.name))
        return self.group._save(*self.args)


def logged_part(file: str, value: Any, log: list[tuple[str, ...]], **kw: Any) -> StatePart:
    def get() -> Any:
        log.append(("get", file))
        return value

    def put(state: Any, step: int) -> None:
        log.append(("put", file, state, step))

    return StatePart(file, JSON, get, put, **kw)


def test_the_step_folder_names() -> None:
    assert actor_file(0, layout.ACTOR_MODEL) == "actor_0/model.safetensors"
    assert actor_file(3, layout.ACTOR_OPTIMIZER) == "actor_3/optimizer.pt"
    assert actor_file(0, layout.ACTOR_TRAINER_STATE) == "actor_0/trainer_state.pt"
    names = {
        layout.ACTOR_DCP: "actor_dcp",
        layout.REPLAY_ARRAYS: "replay/transitions.safetensors",
        layout.REPLAY_STATE: "replay/state.pt",
        layout.WORKERS_FILE: "workers.pt",
        layout.PIPELINE_FILE: "rollout_pipeline.pt",
        layout.REASONING_STATE_FILE: "reasoning_state.json",
        layout.ONLINE_STATE_FILE: "online_state.json",
        layout.REWARD_MODEL_STATE_FILE: "reward_model_state.json",
        layout.DRIVER_RNG_FILE: "driver_rng.json",
        layout.CONFIG_FILE: "config.json",
        layout.SPACES_FILE: "spaces.json",
        layout.COMPLETE_FILE: "COMPLETE",
        layout.MANIFEST: "latest.json",
    }
    assert all(name == expected for name, expected in names.items()), names
    assert layout.step_dir_name(2) == FOLDER
    assert (reader.CONFIG_FILE, reader.SPACES_FILE) == (layout.CONFIG_FILE, layout.SPACES_FILE)
    assert reader.POLICY_WEIGHTS == "actor_0/model.safetensors"


def test_every_codec_writes_the_bytes_of_the_earlier_writers(tmp_path) -> None:
    """Same files, same bytes: old checkpoints load and resumes stay bit-identical."""
    store = LocalCheckpointStore(tmp_path)
    weights = {"w": torch.arange(4.0)}
    state = {"generator": torch.ones(3, dtype=torch.uint8), "version": 2}
    data = {"next_index": 3, "chunks": [{"blob": b"\x00ab", "obs": np.zeros(2)}]}
    workers = ([None], [{0: torch.zeros(2)}])
    cases = [
        ("a.json", JSON, {"sampler": {"cursor": 3}}, b'{"sampler": {"cursor": 3}}'),
        ("b.json", layout.JSON_INDENTED, {"a": 1}, json.dumps({"a": 1}, indent=2).encode()),
        ("m.safetensors", SAFETENSORS, weights, tensors_to_bytes(weights)),
        ("t.pt", TORCH, state, object_to_bytes(state)),
        ("p.pt", TORCH_DATA, data, object_to_bytes(wrap_bytes(data))),
        ("w.pt", SIGNED_WORKERS, workers, encode_workers_state(*workers)),
    ]
    for name, codec, value, expected in cases:
        write_file(store, FOLDER, name, codec, value)
        assert (tmp_path / FOLDER / name).read_bytes() == expected, codec.name
    assert read_file(store, FOLDER, "a.json", JSON) == {"sampler": {"cursor": 3}}
    assert torch.equal(read_file(store, FOLDER, "m.safetensors", SAFETENSORS)["w"], weights["w"])
    loaded = read_file(store, FOLDER, "p.pt", TORCH_DATA)
    assert loaded["chunks"][0]["blob"] == b"\x00ab"
    assert read_file(store, FOLDER, "w.pt", SIGNED_WORKERS)[0] == [None]


def test_a_declared_part_round_trips_in_order(tmp_path) -> None:
    """Save: workers alongside/before/after the driver's parts; load: verify, workers, reverse."""
    log: list[tuple[str, ...]] = []
    trainer, buffer = FakeGroup("trainer", log), FakeGroup("buffer", log)
    parts = [
        WorkerPart(trainer, SaveOrder.ALONGSIDE),
        logged_part("first.json", {"a": 1}, log),
        logged_part("none.json", None, log, optional=True),
        logged_part("second.json", [1, 2], log),
        WorkerPart(buffer, SaveOrder.AFTER),
    ]
    results = save_parts(str(tmp_path), FOLDER, parts, timeout=5.0)
    assert log == [
        ("start", "trainer", "save_checkpoint"),
        ("get", "first.json"),
        ("get", "none.json"),
        ("get", "second.json"),
        ("wait", "trainer"),
        ("save_checkpoint", "buffer"),
    ]
    assert results == {"trainer": [{"version": 7}], "buffer": [{"version": 7}]}
    files = sorted(p.relative_to(tmp_path / FOLDER).as_posix() for p in tmp_path.rglob("*.json"))
    assert files == ["buffer/x.json", "first.json", "second.json", "trainer/x.json"]
    assert (tmp_path / FOLDER / "first.json").read_bytes() == b'{"a": 1}'

    log.clear()
    load_parts(str(tmp_path), FOLDER, 2, parts, timeout=5.0)
    assert log == [
        ("load_checkpoint", "trainer"),
        ("load_checkpoint", "buffer"),
        ("put", "second.json", [1, 2], 2),
        ("put", "none.json", None, 2),  # optional and absent: put back as None
        ("put", "first.json", {"a": 1}, 2),
    ]


def test_parts_before_are_saved_before_the_driver_gathers(tmp_path) -> None:
    log: list[tuple[str, ...]] = []
    parts = [WorkerPart(FakeGroup("trainer", log)), logged_part("s.json", 1, log)]
    save_parts(str(tmp_path), FOLDER, parts, timeout=None)
    assert log == [("save_checkpoint", "trainer"), ("get", "s.json")]


def test_a_trainer_refusing_to_save_stops_every_driver_file(tmp_path) -> None:
    log: list[tuple[str, ...]] = []
    parts = [
        WorkerPart(FakeGroup("trainer", log, refuse=True), SaveOrder.ALONGSIDE),
        logged_part("s.json", 1, log),
    ]
    with pytest.raises(CheckpointError, match="refuses"):
        save_parts(str(tmp_path), FOLDER, parts, timeout=None)
    assert not (tmp_path / FOLDER / "s.json").exists()


def test_a_worker_part_that_does_not_save_still_loads(tmp_path) -> None:
    log: list[tuple[str, ...]] = []
    parts = [WorkerPart(FakeGroup("buffer", log), SaveOrder.AFTER, saves=False)]
    save_parts(str(tmp_path), FOLDER, parts, timeout=None)
    load_parts(str(tmp_path), FOLDER, 2, parts, timeout=None)
    assert log == [("load_checkpoint", "buffer")]


def test_a_missing_required_part_is_refused_before_any_worker_loads(tmp_path) -> None:
    log: list[tuple[str, ...]] = []
    parts = [WorkerPart(FakeGroup("trainer", log)), logged_part("s.json", 1, log)]
    with pytest.raises(CheckpointError, match=r"step_000002/s\.json is missing"):
        load_parts(str(tmp_path), FOLDER, 2, parts, timeout=None)
    assert log == []


def test_tampered_or_poisoned_files_are_refused_and_run_nothing(tmp_path) -> None:
    store, marker = LocalCheckpointStore(tmp_path / "ckpt"), tmp_path / "pwned"
    log: list[tuple[str, ...]] = []
    workers = StatePart(layout.WORKERS_FILE, SIGNED_WORKERS, lambda: None, lambda v, s: None)
    state = StatePart("state.pt", TORCH, lambda: None, lambda v, s: None)
    cursor = state_dict_part("cursor.json", {"sampler": SimpleNamespace()})
    trainer = WorkerPart(FakeGroup("trainer", log))
    # a signed env pickle swapped for code
    data = object_to_bytes(
        wrap_bytes({"env_states": [[{"envs": poisoned_pickle(marker)}]], "rollout_rng": [{}]})
    )
    store.write_bytes(f"{FOLDER}/{layout.WORKERS_FILE}", data)
    with pytest.raises(
        CheckpointError, match=r"workers\.pt \(env worker 0, slice 0\) is not signed"
    ):
        load_parts(store.uri, FOLDER, 2, [trainer, workers], timeout=None)
    # a pickle where torch.load(weights_only=True) expects data
    store.write_bytes(f"{FOLDER}/state.pt", poisoned_pickle(marker))
    with pytest.raises(CheckpointError, match=r"state\.pt could not be loaded"):
        load_parts(store.uri, FOLDER, 2, [trainer, state], timeout=None)
    store.write_bytes(f"{FOLDER}/cursor.json", b"{not json")
    with pytest.raises(CheckpointError, match=r"cursor\.json is not valid JSON"):
        load_parts(store.uri, FOLDER, 2, [trainer, cursor], timeout=None)
    assert not marker.exists()
    assert log == []  # refused before any worker loaded anything


def test_commit_writes_the_driver_files_then_complete_then_the_manifest(tmp_path) -> None:
    order: list[str] = []

    class Recording(LocalCheckpointStore):
        def write_bytes(self, relpath: str, data: bytes) -> None:
            order.append(relpath)
            super().write_bytes(relpath, data)

        def _replace_manifest(self, data: bytes) -> None:
            order.append(layout.MANIFEST)
            super()._replace_manifest(data)

    store = Recording(tmp_path)
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    config = {"run": {"name": "r"}}
    manifest = commit_checkpoint(store, 2, driver_parts(config), {"run_name": "r"})
    assert order == [
        f"{FOLDER}/driver_rng.json",
        f"{FOLDER}/config.json",
        f"{FOLDER}/COMPLETE",
        "latest.json",
    ]
    assert manifest["dir"] == FOLDER and store.latest()["step"] == 2
    assert (tmp_path / FOLDER / "COMPLETE").read_bytes() == b"ok\n"
    assert (tmp_path / FOLDER / "config.json").read_text() == json.dumps(config, indent=2)
    draws = (random.random(), np.random.rand(), torch.rand(1).item())
    restore_driver(store, FOLDER, 2)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == draws


class TinyRuntime(StepRuntime):
    """A runtime with nothing but its checkpoint parts."""

    def __init__(self, cfg: Any, parts: list[Any]) -> None:
        super().__init__(cfg)
        self.parts, self.loaded_at = parts, None

    def checkpoint_parts(self) -> list[Any]:
        return self.parts

    def after_checkpoint_loaded(self, step: int) -> None:
        self.loaded_at = step


TinyRuntime.__abstractmethods__ = frozenset()


def test_the_runtime_saves_and_loads_its_declared_parts(tmp_path) -> None:
    log: list[tuple[str, ...]] = []
    trainer = FakeGroup("trainer", log)
    runtime = TinyRuntime(load_config(), [WorkerPart(trainer), logged_part("s.json", 4, log)])
    saved = runtime.save_checkpoint(str(tmp_path), 2)
    assert saved["dir"] == FOLDER and saved["seconds"] >= 0
    runtime.load_checkpoint(str(tmp_path), FOLDER, 2)
    assert log[-2:] == [("load_checkpoint", "trainer"), ("put", "s.json", 4, 2)]
    assert runtime.loaded_at == 2
