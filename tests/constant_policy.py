"""A registered baseline for promotion tests: a CartPole policy that always pushes left."""

from __future__ import annotations

from pathlib import Path

import torch
from mlflow.tracking import MlflowClient

from infra.checkpoint.export import export_policy
from infra.tracking.model_registry import BEST_ALIAS, register_version
from rl_core.config import load_config
from rl_core.envs import probe_spaces
from rl_core.models import get_model


def register_constant_policy(client: MlflowClient, out: Path, name: str) -> None:
    """Register a policy that always pushes left (all weights zero) as ``best`` of ``name``."""
    cfg = load_config("ppo_cartpole", [])
    spaces = probe_spaces(cfg.env)
    policy = get_model(cfg.model, spaces)
    with torch.no_grad():
        for param in policy.parameters():
            param.zero_()
    model_dir = export_policy(
        policy, cfg.model.model_dump(mode="json"), spaces, out / f"constant-{name}"
    )
    experiment = client.get_experiment_by_name("baselines")
    experiment_id = (
        experiment.experiment_id
        if experiment
        else client.create_experiment("baselines", artifact_location=str(out / "baselines"))
    )
    run_id = client.create_run(experiment_id).info.run_id
    client.log_artifacts(run_id, str(model_dir), "model/constant")
    version = register_version(client, name, run_id, "model/constant", None)
    client.set_registered_model_alias(name, BEST_ALIAS, version.version)
