"""Reward models train through the real train flow (Prefect, Ray, MLflow): the held-out
pairwise accuracy and margin rise, and the model is registered with its score and loads
from the registry; a retried update applies once and a runtime resumed from a checkpoint
continues bit-identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from infra.cluster import ray_cluster
from infra.tracking.model_registry import load_registered_policy
from kinds.reward_model.runtime import RewardModelRuntime
from rl_core.config import load_config
from rl_core.models.reward_model import score_texts
from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import find_run, run_train

pytestmark = pytest.mark.integration

#: Half the pairs prefer the shorter of two correct answers: a tiny model learns that
#: within a few steps, so the accuracy rises clearly in a short run.
QUICK = (
    "run.name=rm-tiny",
    "run.eval_interval=2",
    "run.checkpoint_interval=2",
    "data.shorter_fraction=0.5",
    "data.eval_size=64",
    "actor.steps_per_iteration=10",
    "actor.lr=3e-3",
    "actor.warmup_iterations=0",
    "eval.sample_rows=4",
)


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def test_rm_arith_learns_and_registers(
    tmp_path: Path, train_env: dict[str, str], backbone: Path
) -> None:
    args = ("--config", "rm_arith", f"model.model_path={backbone}", "run.warm_start=null")
    run_train(tmp_path, train_env, *args, *QUICK, "run.max_iterations=4")

    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking)
    run = find_run(client, "rm-tiny")
    assert run.data.tags["rlpipe.algorithm"] == "bradley_terry"
    metrics = {
        key: {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
        for key in ("eval/pairwise_accuracy", "eval/reward_margin", "train/rm_loss")
    }
    accuracy, margin = metrics["eval/pairwise_accuracy"], metrics["eval/reward_margin"]
    assert sorted(accuracy) == [0, 1, 3]  # before training, after iterations 2 and 4
    assert accuracy[3] >= 0.7 and accuracy[3] > accuracy[0], accuracy
    assert margin[3] > margin[0] + 1.0, margin  # chosen responses now score clearly higher
    assert sorted(metrics["train/rm_loss"]) == [0, 1, 2, 3]  # each iteration logged once
    pairs = client.get_metric_history(run.info.run_id, "env/total_steps")
    assert max(m.value for m in pairs) == 4 * 10 * 32  # iterations x steps x pairs

    (model,) = client.search_registered_models()
    assert model.name == "rlpipe-prefs-arith-add-99-hf_reward_model"
    versions = client.search_model_versions(f"name='{model.name}'")
    newest = max(versions, key=lambda v: int(v.version))
    best = max((1, 3), key=lambda step: (accuracy[step], step))  # the best evaluation's step
    assert newest.tags["checkpoint_step"] == str(best + 1)  # its weights' checkpoint
    assert newest.tags["eval_metric"] == "eval/pairwise_accuracy"
    assert float(newest.tags["eval_score"]) == pytest.approx(accuracy[best])
    policy, meta = load_registered_policy(f"models:/{model.name}/latest", tracking)
    assert meta["category"] == "reward_model"
    short, long = score_texts(policy, ["12+7=", "12+7="], ["19", "19, since 12+7=19"])
    assert short > long  # the registered model prefers the shorter correct answer


def test_a_retried_update_applies_once_and_a_resumed_runtime_continues_exactly(
    tmp_path: Path, backbone: Path
) -> None:
    cfg = load_config(
        "rm_arith",
        [*QUICK, f"model.model_path={backbone}", "run.warm_start=null"]
        + ["tracking.enabled=false", "actor.steps_per_iteration=3", f"run.output_dir={tmp_path}"],
    )
    store = str(tmp_path / "store")
    ray_cluster.connect(num_cpus=2)
    runtime = RewardModelRuntime(cfg)
    try:
        runtime.rollout(0)
        runtime.snapshot("update")
        first = runtime.update(0).metrics
        after_first = runtime.actor.full_state()[0]
        runtime.restore("update")  # a retried update: undone, then run again
        assert runtime.update(0).metrics == first
        for name, value in runtime.actor.full_state()[0].items():
            np.testing.assert_array_equal(value, after_first[name], err_msg=name)
        folder = runtime.save_checkpoint(store, 1)["dir"]
        for it in (1, 2):
            runtime.rollout(it)
            runtime.update(it)
        straight = runtime.actor.full_state()[0]
    finally:
        runtime.shutdown()
    resumed = RewardModelRuntime(cfg)
    try:
        resumed.load_checkpoint(store, folder, 1)
        for it in (1, 2):
            resumed.rollout(it)
            resumed.update(it)
        for name, value in resumed.actor.full_state()[0].items():
            np.testing.assert_array_equal(value, straight[name], err_msg=name)
    finally:
        resumed.shutdown()
