"""Experiment and registered-model names follow what a run trains; evaluation protocols;
links that outlive the run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from infra.ops import prefect_api
from infra.ops.prefect_api import lasting_flow_run_url
from rl_core.config import ConfigError, load_config
from rl_core.config.naming import (
    eval_protocol,
    experiment_name,
    registered_model_name,
    task_name,
)


def test_default_preset_is_named_by_env_and_model_type():
    cfg = load_config(None, [])
    assert experiment_name(cfg) == "CartPole-v1-mlp_actor_critic"
    assert registered_model_name(cfg) == "rlpipe-CartPole-v1-mlp_actor_critic"


def test_another_env_on_the_same_preset_gets_its_own_names():
    cfg = load_config("ppo_cartpole", ["env.env_id=Acrobot-v1"])
    assert experiment_name(cfg) == "Acrobot-v1-mlp_actor_critic"
    assert registered_model_name(cfg) == "rlpipe-Acrobot-v1-mlp_actor_critic"
    assert eval_protocol(cfg) != eval_protocol(load_config(None, []))


def test_names_the_user_gives_win_and_templates_fill_in():
    cfg = load_config(
        None,
        [
            "tracking.experiment_name=mine",
            "tracking.registered_model_name='{preset}-{run_name}-{task}'",
        ],
    )
    assert experiment_name(cfg) == "mine"
    assert registered_model_name(cfg) == "ppo_cartpole-ppo-cartpole-CartPole-v1-mlp_actor_critic"
    assert registered_model_name(load_config(None, ["tracking.registered_model_name="])) is None
    with pytest.raises(ConfigError, match=r"only \{task\}, \{preset\}, \{run_name\}"):
        load_config(None, ["tracking.registered_model_name=x-{env}"])


def test_model_names_replace_what_mlflow_refuses():
    cfg = load_config(None, ["env.env_id=phys2d/CartPole-v1"])
    assert task_name(cfg) == "phys2d/CartPole-v1"
    assert registered_model_name(cfg) == "rlpipe-phys2d_CartPole-v1-mlp_actor_critic"


def test_off_policy_and_reasoning_tasks():
    assert experiment_name(load_config("sac_pendulum", [])) == "Pendulum-v1-mlp_sac"
    grpo, sft = load_config("grpo_arith", []), load_config("sft_arith", [])
    assert experiment_name(grpo) == experiment_name(sft) == "arith-add-99-hf_causal_lm"
    # both are scored by greedy accuracy on the same held-out prompts: one protocol
    assert eval_protocol(grpo) == eval_protocol(sft)
    harder = load_config("grpo_arith", ["data.arithmetic_max_operand=999"])
    assert task_name(harder) == "arith-add-999"
    assert eval_protocol(harder) != eval_protocol(grpo)
    # a Hugging Face dataset's held-out split is part of the protocol
    test = ["data.source=hf", "data.options={path: data/ds, eval_split: test}"]
    dev = ["data.source=hf", "data.options={path: data/ds, eval_split: dev}"]
    assert eval_protocol(load_config("grpo_arith", test)) != eval_protocol(
        load_config("grpo_arith", dev)
    )


def test_protocol_ignores_training_settings_and_counts_evaluation_ones():
    base = eval_protocol(load_config(None, []))
    assert eval_protocol(load_config(None, ["run.seed=7", "actor.lr=1e-4"])) == base
    assert eval_protocol(load_config(None, ["eval.num_episodes=3"])) != base
    assert eval_protocol(load_config(None, ["eval.deterministic=false"])) != base


def test_a_cli_runs_flow_link_opens_after_its_temporary_api_stops(monkeypatch):
    temporary = SimpleNamespace(url="http://127.0.0.1:5555/api")
    monkeypatch.setattr(prefect_api, "_started", temporary)
    monkeypatch.setenv("PREFECT_API_URL", temporary.url)
    dead = "http://127.0.0.1:5555/runs/flow-run/abc"
    assert lasting_flow_run_url("abc", dead) == "http://127.0.0.1:4200/runs/flow-run/abc"
    # a run on a lasting API (a stack, a deployment's worker) keeps that API's link
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4300/api")
    own = "http://127.0.0.1:4300/runs/flow-run/abc"
    assert lasting_flow_run_url("abc", own) == own
