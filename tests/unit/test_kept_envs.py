"""Evaluation envs kept between evaluations: the same results as fresh envs, never shared."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinds.embodied import kept_envs
from kinds.embodied.episodes import run_episodes
from rl_core.config import load_config
from rl_core.envs import VectorEnvAdapter
from rl_core.models import get_model


@pytest.fixture(autouse=True)
def empty_store():
    kept_envs.close_kept_envs()
    yield
    kept_envs.close_kept_envs()


def config_and_weights(preset: str, *overrides: str) -> tuple[dict, dict]:
    cfg = load_config(preset, ["tracking.enabled=false", *overrides])
    probe = VectorEnvAdapter(cfg.env, 1, seed=0, vectorization="sync")
    torch.manual_seed(3)
    policy = get_model(cfg.model, probe.spaces)
    probe.close()
    weights = {k: v.detach().numpy().copy() for k, v in policy.state_dict().items()}
    return cfg.model_dump(mode="json"), weights


def without_seconds(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "seconds"}


def test_kept_envs_give_the_results_of_fresh_envs_and_are_reused():
    config, weights = config_and_weights(
        "ppo_cartpole", "eval.num_envs=3", "eval.deterministic=false"
    )
    fresh_config = {**config, "eval": {**config["eval"], "keep_envs": False}}
    fresh = run_episodes(fresh_config, weights, [5, 6, 7, 8])
    assert not kept_envs._kept  # noqa: SLF001 - keep_envs=false keeps nothing
    first = run_episodes(config, weights, [5, 6, 7, 8])
    kept = dict(kept_envs._kept)  # noqa: SLF001
    assert sorted(count for _, count in kept) == [1, 3]  # a chunk of 3, then one of 1
    run_episodes(config, weights, [11, 12, 13, 14])  # other episodes in between
    again = run_episodes(config, weights, [5, 6, 7, 8])
    assert without_seconds(first) == without_seconds(fresh) == without_seconds(again)
    assert all(kept_envs._kept[key] is envs for key, envs in kept.items())  # noqa: SLF001


def test_an_evaluation_that_fails_closes_its_envs_and_two_at_once_never_share():
    cfg = load_config("ppo_cartpole", ["tracking.enabled=false"])
    with pytest.raises(RuntimeError, match="boom"):
        with kept_envs.evaluation_envs(cfg.env, 2, keep=True):
            raise RuntimeError("boom")
    assert not kept_envs._kept  # noqa: SLF001
    with kept_envs.evaluation_envs(cfg.env, 2, keep=True) as first:
        with kept_envs.evaluation_envs(cfg.env, 2, keep=True) as second:
            assert first is not second
    assert list(kept_envs._kept.values()) == [first]  # noqa: SLF001 - the extra set closed
    with kept_envs.evaluation_envs(cfg.env, 2, keep=True) as borrowed:
        assert borrowed is first


def test_the_store_keeps_the_most_recent_settings():
    cfg = load_config("ppo_cartpole", ["tracking.enabled=false"])
    for count in range(1, kept_envs.MAX_KEPT + 2):
        with kept_envs.evaluation_envs(cfg.env, count, keep=True):
            pass
    counts = [count for _, count in kept_envs._kept]  # noqa: SLF001
    assert counts == list(range(2, kept_envs.MAX_KEPT + 2))


def test_kept_maniskill_envs_replay_the_same_episodes():
    pytest.importorskip("mani_skill")
    config, weights = config_and_weights(
        "ppo_pushcube",
        "env.max_episode_steps=12",
        "eval.num_envs=2",
        "model.hidden_sizes=[16,16]",
    )
    fresh_config = {**config, "eval": {**config["eval"], "keep_envs": False}}
    fresh = run_episodes(fresh_config, weights, [21, 22])
    run_episodes(config, weights, [23, 24])
    kept = run_episodes(config, weights, [21, 22])
    assert without_seconds(kept) == without_seconds(fresh)
    assert np.isfinite(kept["returns"]).all() and kept["lengths"] == [12, 12]
