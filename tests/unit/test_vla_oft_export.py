"""Exported VLAs: a plain backbone directory that acts like the original and warm-starts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra.checkpoint.export import POLICY_WEIGHTS_FILE, export_policy, load_exported_policy
from infra.checkpoint.init_from import load_initial_weights
from rl_core.models import get_model
from rl_core.models.tiny_lm import create_tiny_lm
from tests.pixel_policies import (
    kick,
    observations,
    vla_config,
    vla_policy,
    vla_spaces,
)
from tests.policy_checks import assert_same_outputs


def test_exported_vla_is_its_backbone_directory_and_needs_no_original(
    tiny_lm: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    backbone_dir = tmp_path / "backbone"
    shutil.copytree(tiny_lm, backbone_dir)
    policy = get_model(vla_config(backbone_dir), vla_spaces()).eval()
    kick(policy)
    model = vla_config(backbone_dir).model_dump(mode="json")
    out = export_policy(policy, model, vla_spaces(), tmp_path / "vla")
    shutil.rmtree(backbone_dir)  # the export must not need the training-time model_path
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", POLICY_WEIGHTS_FILE} <= names
    assert any(n.startswith("tokenizer") for n in names)
    AutoModelForCausalLM.from_pretrained(out)  # a plain from_pretrained directory
    loaded, meta = load_exported_policy(out)
    assert meta["weights_format"] == "hf_backbone" and meta["model"]["model_path"] == "."
    obs = observations(3)
    assert_same_outputs(policy, loaded, obs)
    # a warm start: the exported weights loaded into a policy built from another backbone
    other = create_tiny_lm(tmp_path / "other", seed=1, num_hidden_layers=1)
    fresh = get_model(vla_config(other), vla_spaces()).eval()
    load_initial_weights(fresh, str(out))
    assert_same_outputs(policy, fresh, obs)
    with pytest.raises(RuntimeError, match="does not fit"):
        load_initial_weights(get_model(vla_config(other), vla_spaces(states=False)), str(out))


def test_init_from_an_exported_vla_sets_its_backbone_and_its_weights(
    tiny_lm: Path, tmp_path: Path
) -> None:
    from infra.driver.init_from import apply_init_from
    from rl_core.config import load_config

    policy = vla_policy(tiny_lm)
    out = export_policy(
        policy, vla_config(tiny_lm).model_dump(mode="json"), vla_spaces(), tmp_path / "m"
    )
    cfg = load_config(
        "ppo_cartpole",
        ["model.model_type=vla_oft", f"run.init_from={out}", f"run.output_dir={tmp_path}"],
    )
    started = apply_init_from(cfg, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert started.model.model_path == started.model.init_weights == str(out)
