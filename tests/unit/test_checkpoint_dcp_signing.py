"""Sharded trainer checkpoints (DCP): signed .metadata, non-tensor entries as plain data."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

from infra.checkpoint import signing
from infra.checkpoint.signed_dcp import METADATA_FILE, SIGNATURE_FILE
from infra.checkpoint.store import CheckpointError
from infra.llm.distributed import load_sharded, save_sharded
from tests.poison import poisoned_pickle

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # DCP without a process group


@pytest.fixture(autouse=True)
def key_path(tmp_path, monkeypatch):
    path = tmp_path / "mine.key"
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(path))
    return path


def trained(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def fresh():
    model = torch.nn.Linear(3, 2)
    return model, torch.optim.Adam(model.parameters(), lr=0.5)


def saved(tmp_path):
    model, optimizer = trained()
    path = tmp_path / "step_000002" / "actor_dcp"
    save_sharded(model, optimizer, path)
    return path, model


def test_save_signs_metadata_and_load_restores(tmp_path):
    path, model = saved(tmp_path)
    signature = json.loads((path / SIGNATURE_FILE).read_text())
    assert signature["alg"] == "hmac-sha256"
    other, optimizer = fresh()
    load_sharded(other, optimizer, path)
    assert torch.equal(other.weight, model.weight) and torch.equal(other.bias, model.bias)
    assert optimizer.param_groups[0]["lr"] == 0.01  # a non-tensor entry, read as data


def test_poisoned_metadata_is_refused_and_runs_nothing(tmp_path):
    path, _ = saved(tmp_path)
    marker = tmp_path / "pwned"
    (path / METADATA_FILE).write_bytes(poisoned_pickle(marker))
    model, optimizer = fresh()
    with pytest.raises(CheckpointError) as info:
        load_sharded(model, optimizer, path)
    msg = str(info.value)
    assert f"{path / METADATA_FILE} does not match its signature" in msg
    assert "--trust-checkpoint" in msg
    assert not marker.exists()


def test_unsigned_or_foreign_metadata_is_refused(tmp_path, monkeypatch, key_path):
    path, _ = saved(tmp_path)
    (path / SIGNATURE_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"\.metadata is not signed"):
        load_sharded(*fresh(), path)
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(tmp_path / "colleague.key"))
    foreign, model = saved(tmp_path / "colleague")
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(key_path))
    with pytest.raises(CheckpointError, match="was signed with another key"):
        load_sharded(*fresh(), foreign)


def test_trust_checkpoint_loads_foreign_metadata_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(tmp_path / "colleague.key"))
    path, model = saved(tmp_path)
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(tmp_path / "mine.key"))
    other, optimizer = fresh()
    with caplog.at_level(logging.WARNING, logger="infra.checkpoint.signing"):
        load_sharded(other, optimizer, path, trust=True)
    assert "was signed with another key" in caplog.text
    assert torch.equal(other.weight, model.weight)


def test_metadata_swapped_after_the_check_is_refused_by_the_reader(tmp_path, monkeypatch):
    """The reader verifies the bytes it unpickles, not only the file checked before."""
    from infra.checkpoint import signed_dcp

    path, _ = saved(tmp_path)
    marker = tmp_path / "pwned"
    checked = signed_dcp.verify_metadata

    def check_then_swap(folder, data, trust):
        checked(folder, data, trust)
        (path / METADATA_FILE).write_bytes(poisoned_pickle(marker))
        monkeypatch.setattr(signed_dcp, "verify_metadata", checked)

    monkeypatch.setattr(signed_dcp, "verify_metadata", check_then_swap)
    with pytest.raises(CheckpointError, match="does not match its signature"):
        load_sharded(*fresh(), path)
    assert not marker.exists()


def poison_first_object_entry(path: Path, marker: Path) -> None:
    """Overwrite a non-tensor entry of the data file with the poisoned pickle."""
    metadata = pickle.loads((path / METADATA_FILE).read_bytes())
    index, info = next(
        (i, s) for i, s in metadata.storage_data.items() if i.fqn.endswith("param_groups.0.lr")
    )
    poison = poisoned_pickle(marker)
    assert len(poison) <= info.length
    data_file = path / info.relative_path
    raw = bytearray(data_file.read_bytes())
    raw[info.offset : info.offset + info.length] = poison.ljust(info.length, b".")
    data_file.write_bytes(bytes(raw))


def test_poisoned_object_entry_in_a_signed_checkpoint_runs_nothing(tmp_path):
    path, _ = saved(tmp_path)
    marker = tmp_path / "pwned"
    poison_first_object_entry(path, marker)
    model, optimizer = fresh()
    with pytest.raises(CheckpointError, match=r"'optim\.param_groups\.0\.lr' of .* not plain"):
        load_sharded(model, optimizer, path)
    assert not marker.exists()
    # control: torch's default planner would have run it (weights_only=False)
    state = {"optim": get_optimizer_state_dict(model, optimizer)}
    with pytest.raises(BaseException):  # noqa: B017 - whatever fails after the code ran
        dcp.load(state, checkpoint_id=str(path))
    assert marker.exists()
