"""The supervised warm start: a train CLI whose ``run.warm_start`` names an SFT preset runs
the SFT flow first (Prefect child flow, MLflow run, export), then RL from the exported model;
and a retried supervised step is undone first (trainer and prompt cursor), so it applies once.
(Which export a run starts from, and when a stopped warm start is resumed or refused:
``tests/unit/test_warm_start.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from infra.cluster import ray_cluster
from kinds.reasoning.runtime import ReasoningRuntime
from rl_core.config import load_config
from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import find_run, run_train

pytestmark = pytest.mark.integration


def sft_config(model: Path) -> dict:
    return {
        "run": {"name": "sft-tiny", "max_iterations": 3, "eval_interval": 3},
        "model": {"model_type": "hf_causal_lm", "model_path": str(model)},
        "data": {"source": "arithmetic", "prompts_per_batch": 8, "eval_size": 8},
        "rollout": {"max_new_tokens": 4},
        "algorithm": {"adv_type": "grpo", "group_size": 1},
        "reward": {"reward_type": "math_verify"},
        "actor": {
            "optimizer": "adamw",
            "lr": 3.0e-3,
            "num_minibatches": 1,
            "micro_batch_size": 8,
            "sft_steps_per_iteration": 2,
        },
        "eval": {"pass_k": 1, "sample_rows": 2},
    }


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def test_train_cli_runs_the_warm_start_then_rl_from_its_model(
    tmp_path: Path, train_env: dict[str, str], prefect_api: str, model: Path
) -> None:
    sft_preset = tmp_path / "sft_tiny.yaml"
    sft_preset.write_text(yaml.safe_dump(sft_config(model)))
    grpo = {
        "run": {"name": "grpo-warm", "max_iterations": 1, "warm_start": str(sft_preset)},
        "model": {"model_type": "hf_causal_lm"},
        "data": {"source": "arithmetic", "prompts_per_batch": 2, "eval_size": 4},
        "rollout": {"max_new_tokens": 4},
        "algorithm": {"adv_type": "grpo", "group_size": 2},
        "reward": {"reward_type": "math_verify"},
        "actor": {"num_minibatches": 1, "micro_batch_size": 4, "update_epochs": 1},
        "eval": {"pass_k": 1, "sample_rows": 2},
    }
    grpo_preset = tmp_path / "grpo_warm.yaml"
    grpo_preset.write_text(yaml.safe_dump(grpo))
    exported = tmp_path / "sft-tiny" / "model"

    # (a stopped warm start is resumed first, or refused: tests/unit/test_warm_start.py)
    out = run_train(tmp_path, train_env, "--config", str(grpo_preset))
    assert f"warm start: running {sft_preset}" in out
    assert (exported / "config.json").is_file() and (exported / "model.safetensors").is_file()

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    sft_run = find_run(client, "sft-tiny")
    losses = client.get_metric_history(sft_run.info.run_id, "train/sft_loss")
    assert sorted(m.step for m in losses) == [0, 1, 2]  # each iteration logged once
    assert all(np.isfinite(m.value) for m in losses)
    skipped = client.get_metric_history(sft_run.info.run_id, "train/skipped_updates")
    assert [m.value for m in skipped] == [0.0, 0.0, 0.0]
    env_steps = client.get_metric_history(sft_run.info.run_id, "env/total_steps")
    assert max(m.value for m in env_steps) == 3 * 2 * 8  # iterations x steps x prompts
    rl_run = find_run(client, "grpo-warm")
    # the SFT model and the RL model it started are of one task: one experiment
    assert sft_run.info.experiment_id == rl_run.info.experiment_id
    # params are logged JSON-encoded
    assert json.loads(rl_run.data.params["model.model_path"]) == str(exported.resolve())
    assert "train/policy_loss" in rl_run.data.metrics
    # the RL model's lineage names the SFT run it started from
    (version,) = [
        v
        for m in client.search_registered_models()
        for v in client.search_model_versions(f"name='{m.name}'")
        if v.run_id == rl_run.info.run_id
    ]
    assert version.tags["parent_sft_run"] == sft_run.info.run_id


def test_a_retried_supervised_step_is_undone_first(tmp_path: Path, model: Path) -> None:
    cfg = load_config(
        str(_write(tmp_path / "sft.yaml", sft_config(model))), ["tracking.enabled=false"]
    )
    ray_cluster.connect(num_cpus=2)
    runtime = ReasoningRuntime(cfg)
    try:
        runtime.snapshot("sft_update")
        first = runtime.sft_step(0)
        after_first = runtime.actor.full_state()[0]
        cursor = runtime.sampler.state_dict()
        # the step is retried (as after a failed task): undone, then run again
        runtime.restore("sft_update")
        again = runtime.sft_step(0)
        assert again.metrics == first.metrics  # the same batch from the same weights
        assert runtime.sampler.state_dict() == cursor  # the cursor moved once
        after_again = runtime.actor.full_state()[0]
        assert after_again.keys() == after_first.keys()
        for name, value in after_first.items():
            np.testing.assert_array_equal(after_again[name], value, err_msg=name)
    finally:
        runtime.shutdown()
        ray_cluster.shutdown()


def _write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path
