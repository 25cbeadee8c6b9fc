"""``run.init_from``: a new run starts from an exported or registered model's weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from infra.checkpoint.export import export_policy
from infra.checkpoint.init_from import (
    InitFromError,
    load_initial_weights,
    start_from_init_weights,
)
from infra.driver.init_from import apply_init_from
from rl_core.config import ConfigError, load_config
from rl_core.envs import probe_spaces
from rl_core.models import get_model
from tests.constant_policy import register_constant_policy


def _exported(tmp_path: Path, fill: float) -> tuple[Path, dict[str, torch.Tensor]]:
    cfg = load_config("ppo_cartpole", [])
    spaces = probe_spaces(cfg.env)
    policy = get_model(cfg.model, spaces)
    with torch.no_grad():
        for param in policy.parameters():
            param.fill_(fill)
    folder = export_policy(policy, cfg.model.model_dump(mode="json"), spaces, tmp_path / "m")
    return folder, {k: v.clone() for k, v in policy.state_dict().items()}


def test_an_exported_folder_becomes_the_trainers_starting_weights(tmp_path: Path) -> None:
    folder, weights = _exported(tmp_path, 0.25)
    cfg = load_config("ppo_cartpole", [f"run.init_from={folder}", f"run.output_dir={tmp_path}"])
    started = apply_init_from(cfg, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert started.model.init_weights == str(folder)
    assert started.run.init_from == str(folder)  # what the user asked for stays in the params
    policy = get_model(started.model, probe_spaces(started.env))
    start_from_init_weights(policy, started.model)
    for name, value in policy.state_dict().items():
        assert torch.equal(value, weights[name]), name


def test_a_registered_version_is_downloaded_into_the_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    register_constant_policy(MlflowClient(uri, registry_uri=uri), tmp_path, "zeros")
    cfg = load_config(
        "ppo_cartpole",
        ["run.init_from=models:/zeros@best", f"run.output_dir={tmp_path}", "run.name=night"],
    )
    started = apply_init_from(cfg, uri)
    folder = Path(started.model.init_weights)
    assert folder.is_relative_to(tmp_path / "night" / "init_model")
    policy = get_model(started.model, probe_spaces(started.env))
    load_initial_weights(policy, str(folder))
    assert all(not value.any() for value in policy.state_dict().values())  # all zeros

    missing = cfg.model_copy(
        update={"run": cfg.run.model_copy(update={"init_from": "models:/zeros@nightly"})}
    )
    with pytest.raises(InitFromError, match="run.init_from=models:/zeros@nightly"):
        apply_init_from(missing, uri)


def test_another_model_type_or_no_model_is_refused(tmp_path: Path) -> None:
    folder, _ = _exported(tmp_path, 0.0)
    sac = load_config("sac_pendulum", [f"run.init_from={folder}"])
    with pytest.raises(InitFromError, match="holds a 'mlp_actor_critic' model but"):
        apply_init_from(sac, "sqlite:///unused.db")
    nothing = load_config("ppo_cartpole", [f"run.init_from={tmp_path / 'nowhere'}"])
    with pytest.raises(InitFromError, match="no such folder"):
        apply_init_from(nothing, "sqlite:///unused.db")
    not_a_model = load_config("ppo_cartpole", [f"run.init_from={tmp_path}"])
    with pytest.raises(InitFromError, match="is not an rlpipe model directory"):
        apply_init_from(not_a_model, "sqlite:///unused.db")


def test_the_config_refuses_a_malformed_uri_and_two_starting_models() -> None:
    with pytest.raises(ConfigError, match="run.init_from"):
        load_config("ppo_cartpole", ["run.init_from=models:/a/b/c"])
    with pytest.raises(ConfigError, match="run.init_from and run.warm_start both"):
        load_config("grpo_arith", ["run.init_from=models:/m@best"])
