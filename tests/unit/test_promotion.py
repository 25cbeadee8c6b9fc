"""Gated promotion on a real MLflow SQLite store: scoring, the decision, tags and aliases."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from flows.promote import artifact_key
from infra.checkpoint.export import export_policy
from infra.tracking.model_registry import (
    BEST_ALIAS,
    EVAL_PROTOCOL_TAG,
    NEWEST_ALIAS,
    SCORE_TAG,
    register_version,
)
from infra.tracking.promotion import (
    compare_newest_with_best,
    newest_wins,
    record_decision,
)
from infra.tracking.version_scoring import PromotionError, protocol_of, recorded_score
from rl_core.config import ConfigError, load_config
from rl_core.config.naming import eval_protocol
from rl_core.envs import probe_spaces
from rl_core.models import get_model

ROOT = Path(__file__).resolve().parents[2]
NAME = "rlpipe-promotion-test"
OVERRIDES = ["eval.num_episodes=3", "eval.max_steps=60"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri, registry_uri=uri)
    experiment = client.create_experiment("promotion", artifact_location=str(root / "art"))
    return uri, client, experiment


@pytest.fixture()
def name(request) -> str:
    """A registered model name of the test's own."""
    return f"{NAME}-{request.node.name.removeprefix('test_').replace('_', '-')}"


def _register(client, experiment, tmp_path, name, seed: int, score: float, move_best: bool = True):
    """A CartPole policy (random init ``seed``) logged like a training run and registered."""
    cfg = load_config("ppo_cartpole", OVERRIDES)
    spaces = probe_spaces(cfg.env)
    torch.manual_seed(seed)
    policy = get_model(cfg.model, spaces)
    model_dir = export_policy(
        policy,
        cfg.model.model_dump(mode="json"),
        spaces,
        tmp_path / f"m{len(list(tmp_path.iterdir()))}",
    )
    run_id = client.create_run(experiment).info.run_id
    client.log_dict(run_id, cfg.model_dump(mode="json"), "config/resolved_config.yaml")
    client.log_artifacts(run_id, str(model_dir), "model/step_000002")
    tags = {EVAL_PROTOCOL_TAG: eval_protocol(cfg), "eval_metric": "eval/return_mean"}
    return register_version(
        client, name, run_id, "model/step_000002", score, tags, move_best=move_best
    )


def test_newest_wins_by_more_than_the_margin() -> None:
    assert newest_wins(10.0, None)  # no best yet
    assert newest_wins(10.0, 9.0)
    assert not newest_wins(10.0, 10.0)
    assert not newest_wins(10.0, 9.5, min_improvement=0.5)
    assert newest_wins(10.0, 9.4, min_improvement=0.5)


def test_gated_registration_moves_only_newest(store, name, tmp_path) -> None:
    _, client, experiment = store
    v1 = _register(client, experiment, tmp_path, name, seed=1, score=10.0)
    v2 = _register(client, experiment, tmp_path, name, seed=2, score=500.0, move_best=False)
    assert set(v1.aliases) == {BEST_ALIAS, NEWEST_ALIAS} and v2.aliases == (NEWEST_ALIAS,)
    assert client.get_model_version_by_alias(name, BEST_ALIAS).version == 1


def test_both_versions_are_evaluated_on_one_protocol_and_approval_moves_best(
    store, name, tmp_path
) -> None:
    uri, client, experiment = store
    _register(client, experiment, tmp_path, name, seed=1, score=10.0)
    _register(client, experiment, tmp_path, name, seed=2, score=9.0, move_best=False)
    comparison = compare_newest_with_best(client, uri, name)
    again = compare_newest_with_best(client, uri, name)
    assert (comparison.newest.version, comparison.best.version) == ("2", "1")
    # played again (not the registered scores), deterministically, on the same seeds
    assert comparison.newest.source == comparison.best.source == "evaluated"
    assert (again.newest.score, again.best.score) == (
        comparison.newest.score,
        comparison.best.score,
    )
    assert [r["seed"] for r in comparison.newest.rows] == [r["seed"] for r in comparison.best.rows]
    assert len(comparison.newest.rows) == 3
    assert comparison.wins == (comparison.newest.score > comparison.best.score)
    text = comparison.markdown()
    assert f"{comparison.newest.score:.4f}" in text and f"{comparison.best.score:.4f}" in text
    assert "| seed | newest return | newest length | best return | best length |" in text

    assert not record_decision(client, comparison, "rejected", "not yet", "run-a")
    assert client.get_model_version_by_alias(name, BEST_ALIAS).version == 1
    assert record_decision(client, comparison, "approved", "looks good", "run-b")
    assert client.get_model_version_by_alias(name, BEST_ALIAS).version == 2
    tags = client.get_model_version(name, "2").tags
    assert tags["promotion"] == "approved" and tags["promotion_note"] == "looks good"
    assert tags["promoted_from_version"] == "1" and tags["promotion_flow_run"] == "run-b"
    assert float(tags["promotion_score"]) == comparison.newest.score
    with pytest.raises(ValueError, match="allowed: approved, auto_approved"):
        record_decision(client, comparison, "maybe")
    # now newest holds best: nothing left to decide
    assert compare_newest_with_best(client, uri, name).newest_is_best


def test_min_improvement_turns_a_win_into_not_better(store, name, tmp_path) -> None:
    uri, client, experiment = store
    _register(client, experiment, tmp_path, name, seed=1, score=10.0)
    _register(
        client, experiment, tmp_path, name, seed=1, score=10.0, move_best=False
    )  # same weights
    comparison = compare_newest_with_best(client, uri, name, min_improvement=0.0)
    assert comparison.newest.score == comparison.best.score and not comparison.wins
    assert not record_decision(client, comparison, "not_better")
    assert client.get_model_version(name, "2").tags["promotion"] == "not_better"


def test_recorded_scores_compare_only_under_the_same_protocol(store, name, tmp_path) -> None:
    _, client, experiment = store
    _register(client, experiment, tmp_path, name, seed=1, score=10.0)
    version = client.get_model_version(name, "1")
    protocol = protocol_of(client, version)
    assert recorded_score(protocol, version).score == 10.0
    client.set_model_version_tag(name, "1", EVAL_PROTOCOL_TAG, "another")
    with pytest.raises(PromotionError, match="scores do not compare"):
        recorded_score(protocol, client.get_model_version(name, "1"))
    client.set_model_version_tag(name, "1", EVAL_PROTOCOL_TAG, protocol.digest)
    client.delete_model_version_tag(name, "1", SCORE_TAG)
    with pytest.raises(PromotionError, match="no eval_score tag"):
        recorded_score(protocol, client.get_model_version(name, "1"))


def test_no_versions_is_a_promotion_error(store, name) -> None:
    uri, client, _ = store
    client.create_registered_model(name)
    with pytest.raises(PromotionError, match="has no versions"):
        compare_newest_with_best(client, uri, name)


def test_promotion_config_is_validated_and_keys_are_artifact_safe() -> None:
    cfg = load_config("ppo_cartpole", [])
    assert cfg.tracking.promotion == "on_register" and not cfg.tracking.promotion_auto_approve
    with pytest.raises(ConfigError, match="tracking.promotion"):
        load_config("ppo_cartpole", ["tracking.promotion=later"])
    with pytest.raises(ConfigError, match="promotion_min_improvement"):
        load_config("ppo_cartpole", ["tracking.promotion_min_improvement=-1"])
    assert artifact_key("rlpipe-CartPole-v1-mlp_actor_critic") == (
        "promotion-rlpipe-cartpole-v1-mlp-actor-critic"
    )


def test_the_promote_trigger_takes_the_model_name_from_the_registration_event() -> None:
    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.server.utilities.user_templates import render_user_template_sync

    from tasks.register_model import REGISTERED_EVENT

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    (deployment,) = [d for d in spec["deployments"] if d["name"] == "promote-newest"]
    (trigger,) = deployment["triggers"]
    assert trigger["expect"] == [REGISTERED_EVENT]
    event = ReceivedEvent(
        occurred=datetime.now(UTC),
        event=REGISTERED_EVENT,
        resource={"prefect.resource.id": f"mlflow.model.{NAME}", "rlpipe.model": NAME},
        id=uuid.uuid4(),
    )
    template = trigger["parameters"]["model_name"]
    assert render_user_template_sync(template, {"event": event}) == NAME
