"""Model registry on a real MLflow SQLite store: versions, aliases, loading back."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from infra.checkpoint.export import export_policy
from infra.tracking.model_registry import (
    BEST_ALIAS,
    EVAL_PROTOCOL_TAG,
    NEWEST_ALIAS,
    load_registered_policy,
    register_version,
    resolve_model_uri,
)
from rl_core.config import load_config
from rl_core.envs import probe_spaces
from rl_core.models import get_model

NAME = "rlpipe-test-model"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("registry", artifact_location=str(root / "artifacts"))
    return uri, client, experiment


def _logged_policy(client, experiment, tmp_path, seed):
    cfg = load_config("ppo_cartpole", [])
    spaces = probe_spaces(cfg.env)
    torch.manual_seed(seed)
    policy = get_model(cfg.model, spaces)
    model_dir = export_policy(policy, cfg.model.model_dump(mode="json"), spaces, tmp_path / "m")
    run_id = client.create_run(experiment).info.run_id
    client.log_artifacts(run_id, str(model_dir), "model/step_000003")
    return run_id, policy


def _actions(policy, obs):
    with torch.no_grad():
        actions, _ = policy.predict_action_batch({"states": obs}, mode="eval", compute_values=False)
    return np.asarray(actions)


def test_versions_aliases_and_loading(store, tmp_path) -> None:
    uri, client, experiment = store
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)

    run1, policy1 = _logged_policy(client, experiment, tmp_path / "1", seed=1)
    v1 = register_version(client, NAME, run1, "model/step_000003", 100.0, {"eval_step": "2"})
    assert v1.version == "1" and set(v1.aliases) == {BEST_ALIAS, NEWEST_ALIAS}

    run2, policy2 = _logged_policy(client, experiment, tmp_path / "2", seed=2)
    v2 = register_version(client, NAME, run2, "model/step_000003", 50.0)
    assert v2.aliases == (NEWEST_ALIAS,)  # worse: best stays on version 1

    run3, _ = _logged_policy(client, experiment, tmp_path / "3", seed=3)
    v3 = register_version(client, NAME, run3, "model/step_000003", None)  # not evaluated
    assert v3.aliases == (NEWEST_ALIAS,)

    best = client.get_model_version_by_alias(NAME, BEST_ALIAS)
    assert str(best.version) == "1" and best.tags["eval_score"] == "100.0"
    assert best.tags["eval_step"] == "2" and best.run_id == run1
    assert str(resolve_model_uri(client, f"models:/{NAME}@{NEWEST_ALIAS}").version) == "3"
    assert str(resolve_model_uri(client, f"models:/{NAME}/latest").version) == "3"
    assert str(resolve_model_uri(client, f"models:/{NAME}/2").version) == "2"
    with pytest.raises(ValueError, match="not models:/"):
        resolve_model_uri(client, "runs:/abc/model")

    loaded, meta = load_registered_policy(f"models:/{NAME}@best", uri, dst=tmp_path / "dl")
    assert meta["model_type"] == "mlp_actor_critic"
    np.testing.assert_array_equal(_actions(loaded, obs), _actions(policy1, obs))
    loaded2, _ = load_registered_policy(f"models:/{NAME}/2", uri)
    for a, b in zip(loaded2.state_dict().values(), policy2.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    v4 = register_version(client, NAME, run3, "model/step_000003", 150.0)
    assert set(v4.aliases) == {BEST_ALIAS, NEWEST_ALIAS}
    assert client.get_registered_model(NAME).aliases == {BEST_ALIAS: 4, NEWEST_ALIAS: 4}


def test_best_only_compares_scores_of_one_evaluation_protocol(store, tmp_path, caplog) -> None:
    uri, client, experiment = store
    name = "rlpipe-protocols"
    run1, _ = _logged_policy(client, experiment, tmp_path / "1", seed=1)
    tags = {EVAL_PROTOCOL_TAG: "aaaa"}
    v1 = register_version(client, name, run1, "model/step_000003", 100.0, tags)
    assert BEST_ALIAS in v1.aliases
    # a higher score measured another way (say, 3 episodes instead of 10) does not win
    run2, _ = _logged_policy(client, experiment, tmp_path / "2", seed=2)
    other = {EVAL_PROTOCOL_TAG: "bbbb"}
    v2 = register_version(client, name, run2, "model/step_000003", 500.0, other)
    assert v2.aliases == (NEWEST_ALIAS,)
    assert "scored under another evaluation protocol" in caplog.text
    # the same protocol compares as before
    run3, _ = _logged_policy(client, experiment, tmp_path / "3", seed=3)
    v3 = register_version(client, name, run3, "model/step_000003", 101.0, tags)
    assert BEST_ALIAS in v3.aliases
    assert str(client.get_model_version_by_alias(name, BEST_ALIAS).version) == v3.version
