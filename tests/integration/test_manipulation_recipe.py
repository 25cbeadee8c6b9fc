"""The manipulation recipe from the command line: one ``rlpipe train`` whose warm start is a
behaviour-cloning preset collects the expert demonstrations (the ``demos`` flow, an MLflow
dataset), clones them (the ``sft`` flow) and continues with RL from the cloned policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.integration.conftest import (
    ROOT,
    find_run,
    run_process,
    run_train,
    seed_mlflow_store,
)
from tests.libero_files import write_libero

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


def test_sft_clones_libero_demonstration_files_converted_by_the_demos_flow(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    """``rlpipe sft --config sft_vla_libero`` on LIBERO's own HDF5 files (written here in
    LIBERO's layout, 16x16 frames resized to the env's 32x32): the ``demos`` flow converts
    them (``demos.import_from``, an MLflow dataset), the run clones them, evaluates in LIBERO
    and exports the policy ``grpo_vla_libero`` continues from (``run.init_from``)."""
    files = tmp_path / "libero_files"
    files.mkdir()
    write_libero(files / "pick_up_the_black_bowl_demo.hdf5", lengths=(12, 9))
    write_libero(files / "put_the_bowl_on_the_plate_demo.hdf5", lengths=(10,))
    cmd = [sys.executable, str(ROOT / "flows" / "sft.py"), "--config", "sft_vla_libero"]
    cmd += [
        f"run.output_dir={tmp_path}",
        "run.max_iterations=2",
        "run.eval_interval=0",
        "env.num_envs=1",
        "env.max_episode_steps=8",
        "env.manipulation.image_size=32",
        "env.manipulation.tasks=[0]",  # one task: switching tasks builds another simulator
        f"model.model_path={tmp_path / 'tiny-lm'}",
        f"demos.import_from={files}",
        "demos.batch_size=8",
        "demos.steps_per_iteration=2",
        "eval.num_episodes=1",  # a LIBERO camera step costs ~0.2 s
        "eval.num_envs=1",
        "tracking.learning_curve=false",
        "tracking.registered_model_name=null",
    ]
    seed_mlflow_store(tmp_path)
    proc = run_process(cmd, train_env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    (dataset,) = (tmp_path / "demos").iterdir()
    manifest = json.loads((dataset / "demos.json").read_text())
    # 12, 9 and 10 steps in chunks of 8 (the preset's action_chunk): 2 env steps each
    assert (manifest["source"], manifest["episodes"], manifest["steps"]) == ("libero_hdf5", 3, 6)
    assert manifest["spaces"]["main_images"]["shape"] == [32, 32, 3]
    assert manifest["spaces"]["actions"]["shape"] == [56]

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert find_run(client, "demos-libero").data.metrics["demos/success_rate"] == 1.0
    bc_run = find_run(client, "sft-vla-libero")
    inputs = {d.dataset.name: [t.value for t in d.tags] for d in bc_run.inputs.dataset_inputs}
    assert inputs == {dataset.name: ["training"]}
    losses = client.get_metric_history(bc_run.info.run_id, "train/bc_loss")
    assert sorted(m.step for m in losses) == [0, 1]
    assert bc_run.data.metrics["eval/success_rate"] == 0.0  # one 8-step episode
    assert (tmp_path / "sft-vla-libero" / "model" / "model.safetensors").is_file()
