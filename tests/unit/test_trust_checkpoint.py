"""--trust-checkpoint: the CLIs' flag reaches the loaders; untrusted configs run no model code."""

from __future__ import annotations

import contextlib
import json

import pytest

from flows import cli
from flows import evaluate as evaluate_flow
from infra.checkpoint import convert
from infra.checkpoint.reader import locate_checkpoint, read_config
from infra.checkpoint.serialize import tensors_to_bytes
from infra.checkpoint.store import CheckpointError, LocalCheckpointStore, step_dir_name
from rl_core.config import load_config
from rl_core.envs import probe_spaces
from rl_core.models import get_model


@pytest.fixture()
def no_services(monkeypatch):
    """The CLIs without a Prefect server or signal handlers."""
    monkeypatch.setattr(
        cli, "prefect_api", lambda output_dir, cluster=None: contextlib.nullcontext("api")
    )
    monkeypatch.setattr(cli, "install_stop_handlers", lambda: None)


@pytest.mark.parametrize("flag, trusted", [((), False), (("--trust-checkpoint",), True)])
def test_train_cli_flag_sets_run_trust_checkpoint(tmp_path, no_services, flag, trusted):
    seen = {}

    def train_flow(preset, overrides):
        seen["cfg"] = load_config(preset, overrides)
        return {}

    args = ["--run-name", "r1", f"run.output_dir={tmp_path}", *flag]
    assert cli.run_cli(train_flow, args) == 0
    assert seen["cfg"].run.trust_checkpoint is trusted
    assert seen["cfg"].run.name == "r1"


@pytest.mark.parametrize("flag, trusted", [((), False), (("--trust-checkpoint",), True)])
def test_evaluate_cli_flag_reaches_the_flow(no_services, monkeypatch, flag, trusted, capsys):
    calls = []
    monkeypatch.setattr(evaluate_flow, "evaluate", lambda *args: calls.append(args) or {})
    assert evaluate_flow.main(["--run-name", "r1", *flag]) == 0
    assert calls == [("r1", "outputs", 10, None, None, trusted)]


def write_checkpoint(root, trust_remote_code=False):
    cfg = load_config()
    policy = get_model(cfg.model, probe_spaces(cfg.env))
    store = LocalCheckpointStore(root)
    folder = step_dir_name(1)
    config = cfg.model_dump(mode="json")
    if trust_remote_code:
        config["model"]["trust_remote_code"] = True  # as a foreign checkpoint may
    store.write_bytes(f"{folder}/config.json", json.dumps(config).encode())
    store.write_bytes(f"{folder}/actor_0/model.safetensors", tensors_to_bytes(policy.state_dict()))
    store.write_bytes(f"{folder}/COMPLETE", b"ok\n")
    store.commit(1, {})
    return store


def test_checkpoint_asking_for_model_code_needs_trust(tmp_path, capsys):
    store = write_checkpoint(tmp_path / "ckpt", trust_remote_code=True)
    with pytest.raises(CheckpointError) as info:
        read_config(locate_checkpoint(store.root))
    msg = str(info.value)
    assert "step_000001/config.json sets model.trust_remote_code: true" in msg
    assert "--trust-checkpoint" in msg
    assert read_config(locate_checkpoint(store.root, trust=True))["model"]["trust_remote_code"]

    out = tmp_path / "model"
    assert convert.main(["--checkpoint", str(store.root), "--out", str(out)]) == 2
    assert "sets model.trust_remote_code: true" in capsys.readouterr().err
    assert not out.exists()
    args = ["--checkpoint", str(store.root), "--out", str(out), "--trust-checkpoint"]
    # trusted, it converts (an embodied model with a Hugging Face backbone reads the flag)
    assert convert.main(args) == 0
    assert (out / "model.safetensors").is_file()


def test_plain_checkpoints_need_no_trust(tmp_path):
    store = write_checkpoint(tmp_path / "ckpt")
    assert not read_config(locate_checkpoint(store.root))["model"].get("trust_remote_code")
    out = tmp_path / "model"
    assert convert.main(["--checkpoint", str(store.root), "--out", str(out)]) == 0
    assert (out / "model.safetensors").is_file()
