"""model.model_path as a Hugging Face hub id: accepted by the config, resolved from the local
Hugging Face cache (the layout ``hf download`` writes) before any worker starts, refused
with the command that downloads it when it is not there; never downloaded unless
model.hub_download."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from huggingface_hub import constants

from flows.cli import preflight
from flows.run_loop import prepare_model_files
from infra.hub_models import HubModelError, check_model_path, resolve_model_path
from rl_core.config import ConfigError, load_config
from rl_core.models.model_path import hub_model_id
from rl_core.models.standin import create_standin
from scripts.build_standin import TEST_FILE, TRAIN_FILE, write_gsm8k
from tests.hf_cache import cache_model

MODEL_ID = "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.fixture()
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, offline (a test never reaches the network)."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_standin(tmp_path_factory.mktemp("standin") / "model")


@pytest.mark.parametrize(
    ("path", "hub_id"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
        ("openai-community/gpt2", "openai-community/gpt2"),
        ("/abs/path/model", None),
        ("./Qwen/x", None),
        ("a/b/c", None),
        ("gpt2", None),  # no owner: rlpipe reads hub ids as owner/name only
        ("a/../b", None),
        ("~/models/x", None),
        (None, None),
    ],
)
def test_which_paths_read_as_hub_ids(path, hub_id) -> None:
    assert hub_model_id(path) == hub_id


def test_a_local_folder_wins_over_a_hub_id(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs" / "tiny-lm").mkdir(parents=True)
    assert hub_model_id("outputs/tiny-lm") is None


def test_the_preset_loads_without_the_model_and_a_missing_local_folder_does_not(
    tmp_path: Path,
) -> None:
    cfg = load_config("grpo_gsm8k_qwen05b")
    assert cfg.model.model_path == MODEL_ID and not cfg.model.hub_download
    with pytest.raises(ConfigError, match="not a local Hugging Face model directory"):
        load_config("grpo_gsm8k_qwen05b", [f"model.model_path={tmp_path / 'nothing'}"])


def test_a_cached_hub_model_resolves_to_its_snapshot(hf_cache: Path, standin: Path) -> None:
    snapshot = cache_model(hf_cache, MODEL_ID, standin)
    cfg = load_config("grpo_gsm8k_qwen05b")
    assert resolve_model_path(cfg.model) == str(snapshot)
    prepared = prepare_model_files(cfg)
    assert prepared.model.model_path == str(snapshot)
    assert prepare_model_files(prepared).model.model_path == str(snapshot)  # local now


def test_a_missing_hub_model_is_refused_before_anything_starts(hf_cache: Path) -> None:
    cfg = load_config("grpo_gsm8k_qwen05b")
    with pytest.raises(HubModelError) as info:
        preflight(cfg)  # the CLI's checks: exit code 2, no server or worker started
    message = str(info.value)
    assert f"hf download {MODEL_ID}" in message and "model.hub_download=true" in message
    assert str(hf_cache) in message
    assert isinstance(info.value, ConfigError)
    with pytest.raises(HubModelError):
        prepare_model_files(cfg)  # deployments and scripts that call the flow directly


def test_a_run_starting_from_other_weights_needs_no_hub_model(
    hf_cache: Path, tmp_path: Path
) -> None:
    data = write_gsm8k(tmp_path / "gsm8k", train=4, test=2)
    files = [f"data.train_files=[{data / TRAIN_FILE}]", f"data.eval_files=[{data / TEST_FILE}]"]
    cfg = load_config("grpo_gsm8k_qwen05b", [*files, "run.init_from=models:/m/1"])
    preflight(cfg)  # run.init_from gives the model: the uncached hub id is not looked up
    with pytest.raises(HubModelError):
        preflight(load_config("grpo_gsm8k_qwen05b", files))


def test_snapshots_without_safetensors_or_config_are_refused(
    hf_cache: Path, standin: Path, tmp_path: Path
) -> None:
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(standin / "config.json", pickled / "config.json")
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    cache_model(hf_cache, "owner/pickled", pickled)
    cfg = load_config("grpo_gsm8k_qwen05b", ["model.model_path=owner/pickled"])
    with pytest.raises(HubModelError, match="no \\*.safetensors weights.*pytorch_model.bin"):
        resolve_model_path(cfg.model)
    cache_model(hf_cache, "owner/partial", None)
    cfg = load_config("grpo_gsm8k_qwen05b", ["model.model_path=owner/partial"])
    with pytest.raises(HubModelError, match="has no config.json"):
        resolve_model_path(cfg.model)


def test_hub_download_fetches_only_when_the_cache_lacks_the_model(
    hf_cache: Path, standin: Path
) -> None:
    cfg = load_config("grpo_gsm8k_qwen05b", ["model.hub_download=true"])
    check_model_path(cfg.model)  # the CLI leaves the download to the flow
    # offline here: the download is tried and fails with the hub's reason
    with pytest.raises(HubModelError, match="download from the Hugging Face hub failed"):
        resolve_model_path(cfg.model)
    snapshot = cache_model(hf_cache, MODEL_ID, standin)
    assert resolve_model_path(cfg.model) == str(snapshot)  # cached: nothing downloaded
