"""``run.warm_start``: which SFT export a reasoning run starts from, and when the SFT run
is run (or resumed) first. The SFT flow is replaced by a function; the end-to-end run
(SFT, then RL from its model) is ``tests/integration/test_sft_warm_start.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import flows.train as train_module
from flows.train import WarmStartError, prepare_model
from infra.checkpoint.export import EXPORT_FORMAT_VERSION, META_FILE
from rl_core.config import load_config


def _configs(tmp_path: Path) -> tuple[Any, Path]:
    sft = {
        "run": {"name": "sft-tiny"},
        "model": {
            "model_type": "hf_causal_lm",
            "model_path": str(tmp_path / "base"),
            "tiny_init": True,  # (created by the SFT run, which these tests replace)
        },
        "data": {"source": "arithmetic"},
        "algorithm": {"adv_type": "grpo", "group_size": 1},
        "reward": {"reward_type": "math_verify"},
    }
    preset = tmp_path / "sft_tiny.yaml"
    preset.write_text(yaml.safe_dump(sft))
    cfg = load_config(
        "grpo_arith", [f"run.warm_start={preset}", f"run.output_dir={tmp_path}", "run.name=rl"]
    )
    return cfg, tmp_path / "sft-tiny" / "model"


def _export(model_dir: Path, finished: bool) -> None:
    model_dir.mkdir(parents=True)
    meta = {"format": EXPORT_FORMAT_VERSION, "source": {"finished": finished}}
    (model_dir / META_FILE).write_text(json.dumps(meta))
    (model_dir / "config.json").write_text("{}")


@pytest.fixture()
def sft_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(train_module, "prepare_model_files", lambda cfg: cfg)
    monkeypatch.setattr(train_module, "sft", lambda **kwargs: calls.append(kwargs) or {})
    return calls


def test_a_finished_export_is_used_without_running_sft(tmp_path: Path, sft_calls) -> None:
    cfg, model_dir = _configs(tmp_path)
    _export(model_dir, finished=True)
    prepared = prepare_model(cfg)
    assert prepared.model.model_path == str(model_dir.resolve()) and sft_calls == []


def test_a_stopped_export_runs_sft_again_and_a_second_stop_is_refused(
    tmp_path: Path, sft_calls
) -> None:
    cfg, model_dir = _configs(tmp_path)
    _export(model_dir, finished=False)  # e.g. Ctrl-C during the warm start
    with pytest.raises(WarmStartError, match="stopped before finishing; rerun the same command"):
        prepare_model(cfg)  # the SFT run (resumed) stopped again: no model_dir in its summary
    assert [c["preset"] for c in sft_calls] == [cfg.run.warm_start]
    assert f"run.output_dir={tmp_path}" in sft_calls[0]["overrides"]


def test_without_an_export_sft_runs_first(tmp_path: Path, monkeypatch) -> None:
    cfg, model_dir = _configs(tmp_path)
    monkeypatch.setattr(train_module, "prepare_model_files", lambda cfg: cfg)

    def finishing_sft(**kwargs: Any) -> dict[str, Any]:
        _export(model_dir, finished=True)
        return {"model_dir": str(model_dir)}

    monkeypatch.setattr(train_module, "sft", finishing_sft)
    assert prepare_model(cfg).model.model_path == str(model_dir.resolve())


@pytest.mark.parametrize("preset", ["sft_agent_calc", "sft_arith", "sft_vla_metaworld"])
def test_a_preset_creates_its_tiny_model_under_the_runs_output_dir(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not under ``./outputs`` of the working directory: a run with ``run.output_dir`` set
    writes nothing outside it."""
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    created: list[str] = []
    monkeypatch.setattr(
        "rl_core.models.tiny_lm.create_tiny_lm", lambda path, seed=0: created.append(path)
    )
    out = tmp_path / "runs"
    cfg = train_module.prepare_model_files(load_config(preset, [f"run.output_dir={out}"]))
    relative = load_config(preset).model.model_path
    assert not Path(relative).is_absolute()
    assert cfg.model.model_path == str((out / relative).resolve())
    assert created == [cfg.model.model_path] and list(workdir.iterdir()) == []
    absolute = tmp_path / "elsewhere" / "lm"
    cfg = train_module.prepare_model_files(
        load_config(preset, [f"run.output_dir={out}", f"model.model_path={absolute}"])
    )
    assert cfg.model.model_path == str(absolute)


def test_a_warm_start_registers_under_another_name_than_the_run_it_feeds() -> None:
    """Under one name, the SFT version and the RL versions would compete for ``best`` (and
    where their evaluation protocols differ, each registration of the RL run warns)."""
    from rl_core.config.loader import available_presets
    from rl_core.config.naming import registered_model_name

    pairs = []
    for name in available_presets():
        cfg = load_config(name)
        if cfg.run.warm_start and registered_model_name(cfg):
            sft = load_config(cfg.run.warm_start)
            pairs.append(name)
            assert registered_model_name(sft) != registered_model_name(cfg), name
            assert registered_model_name(sft).endswith("-sft"), cfg.run.warm_start
    assert {"grpo_arith", "agent_calc", "code_tests", "grpo_vla_metaworld"} <= set(pairs)
