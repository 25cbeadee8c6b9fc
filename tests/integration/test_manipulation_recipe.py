"""The manipulation recipe from the command line: one ``rlpipe train`` whose warm start is a
behaviour-cloning preset collects the expert demonstrations (the ``demos`` flow, an MLflow
dataset), clones them (the ``sft`` flow) and continues with RL from the cloned policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.integration.conftest import find_run, run_train

pytestmark = pytest.mark.integration
ENV = {
    "env_type": "metaworld",
    "num_envs": 2,
    "max_episode_steps": 150,
    "manipulation": {"tasks": ["reach-v3", "button-press-topdown-v3"], "obs_mode": "state"},
}
QUICK_EVAL = {"num_episodes": 2, "num_envs": 2, "video": False}


def test_train_runs_demos_then_cloning_then_rl_from_the_cloned_policy(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    sft = {
        "run": {"name": "bc-tiny", "max_iterations": 3, "eval_interval": 3},
        "env": ENV,
        "model": {"model_type": "mlp_actor_critic", "hidden_sizes": [32, 32]},
        "demos": {"episodes": 4, "num_workers": 2, "batch_size": 64, "steps_per_iteration": 5},
        "eval": QUICK_EVAL,
        "tracking": {"registered_model_name": None},
    }
    sft_preset = tmp_path / "bc_tiny.yaml"
    sft_preset.write_text(yaml.safe_dump(sft))
    out = run_train(
        tmp_path,
        train_env,
        "--config",
        "ppo_metaworld",
        f"run.warm_start={sft_preset}",
        "run.max_iterations=1",
        "env.num_envs=2",
        "env.max_episode_steps=60",
        "env.manipulation.tasks=[reach-v3,button-press-topdown-v3]",
        "rollout.num_steps=30",
        "model.hidden_sizes=[32,32]",
        "eval.num_episodes=2",
        "eval.num_envs=2",
        "tracking.registered_model_name=null",
    )
    assert "collecting them first" in out
    (dataset,) = (tmp_path / "demos").iterdir()
    assert (dataset / "demos.json").is_file()
    exported = tmp_path / "bc-tiny" / "model"
    assert (exported / "model.safetensors").is_file()

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    demos_run = find_run(client, "demos-metaworld")
    assert demos_run.data.metrics["demos/episodes"] == 4.0
    assert demos_run.data.metrics["demos/success_rate"] == 1.0  # the experts, 150 steps
    bc_run = find_run(client, "bc-tiny")
    inputs = {d.dataset.name: [t.value for t in d.tags] for d in bc_run.inputs.dataset_inputs}
    assert inputs == {dataset.name: ["training"]}
    losses = client.get_metric_history(bc_run.info.run_id, "train/bc_loss")
    assert sorted(m.step for m in losses) == [0, 1, 2]
    assert losses[-1].value < losses[0].value
    assert 0.0 <= bc_run.data.metrics["eval/success_rate"] <= 1.0

    rl_run = find_run(client, "ppo-metaworld")
    assert rl_run.data.params["model.init_weights"].strip('"') == str(exported.resolve())
    assert np.isfinite(rl_run.data.metrics["train/policy_loss"])
