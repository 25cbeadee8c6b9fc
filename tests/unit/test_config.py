"""Config schema, preset loading, dotted overrides and the wording of every config error."""

import re

import pytest
import yaml

from rl_core.config import ConfigError, RLPipeConfig, available_presets, load_config
from rl_core.config.loader import parse_override
from rl_core.config.placement import parse_component_placement, parse_cpu_set


def error_of(*overrides: str, preset: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(preset, list(overrides))
    return str(info.value)


# -- defaults and overrides ----------------------------------------------------------------


def test_default_preset_is_ppo_cartpole():
    cfg = load_config()
    assert isinstance(cfg, RLPipeConfig)
    assert cfg.preset == "ppo_cartpole"
    assert "ppo_cartpole" in available_presets()
    # values from rl_core/presets/ppo_cartpole.yaml
    assert cfg.run.name == "ppo-cartpole"
    assert cfg.run.max_iterations == 60
    assert cfg.run.stop_at_eval_return == 475
    assert cfg.actor.lr == pytest.approx(2.5e-3)
    assert cfg.env.env_id == "CartPole-v1"
    assert cfg.env.num_envs == 8
    # values only in the schema
    assert cfg.env.env_type == "gym"
    assert cfg.model.model_type == "mlp_actor_critic"
    assert cfg.model.hidden_sizes == [64, 64]
    assert cfg.algorithm.adv_type == "gae"
    assert cfg.algorithm.loss_type == "ppo"
    assert cfg.reward.reward_type == "env"
    assert cfg.cluster.component_placement == {"env,rollout,actor": "all"}


def test_named_preset_equals_default():
    assert load_config("ppo_cartpole") == load_config()


def test_overrides_are_typed_via_yaml():
    cfg = load_config(
        overrides=[
            "actor.lr=1e-3",
            "env.num_envs=16",
            "model.hidden_sizes=[32,32]",
            "algorithm.normalize_advantages=false",
            "run.stop_at_eval_return=null",
            "cluster.component_placement={actor: '1', 'env,rollout': 0}",
        ]
    )
    assert type(cfg.actor.lr) is float and cfg.actor.lr == 1e-3
    assert type(cfg.env.num_envs) is int and cfg.env.num_envs == 16
    assert cfg.model.hidden_sizes == [32, 32]
    assert cfg.algorithm.normalize_advantages is False
    assert cfg.run.stop_at_eval_return is None
    assert cfg.cluster.component_placement == {"actor": "1", "env,rollout": 0}
    # untouched values keep the preset's
    assert cfg.actor.update_epochs == 4


def test_later_override_wins():
    cfg = load_config(overrides=["actor.lr=0.1", "actor.lr=0.2"])
    assert cfg.actor.lr == 0.2


def test_parse_override_keeps_equals_in_value():
    assert parse_override("run.name=a=b") == (["run", "name"], "a=b")
    assert parse_override("env.kwargs={g: 9.8}") == (["env", "kwargs"], {"g": 9.8})


def test_model_section_keeps_extra_keys():
    cfg = load_config(overrides=["model.my_custom_width=7"])
    assert cfg.model.model_extra == {"my_custom_width": 7}


def test_preset_as_yaml_file_path(tmp_path):
    path = tmp_path / "my_run.yaml"
    path.write_text(yaml.safe_dump({"actor": {"lr": 0.01}, "env": {"env_id": "Pendulum-v1"}}))
    cfg = load_config(str(path), ["env.num_envs=4"])
    assert cfg.preset == "my_run"
    assert cfg.actor.lr == 0.01
    assert cfg.env.env_id == "Pendulum-v1"
    assert cfg.env.num_envs == 4
    assert cfg.run.max_iterations == 100  # schema default, not ppo_cartpole's 60


# -- error messages: numbers, types, literals ----------------------------------------------


def test_negative_learning_rate():
    msg = error_of("actor.lr=-1")
    assert "actor.lr = -1" in msg
    assert "greater than 0" in msg


def test_zero_max_iterations():
    msg = error_of("run.max_iterations=0")
    assert "run.max_iterations = 0" in msg
    assert "greater than or equal to 1" in msg


def test_clip_ratio_c_must_exceed_one():
    msg = error_of("algorithm.clip_ratio_c=1")
    assert "algorithm.clip_ratio_c = 1" in msg
    assert "greater than 1" in msg
    assert load_config(overrides=["algorithm.clip_ratio_c=3"]).algorithm.clip_ratio_c == 3.0


def test_wrong_type():
    msg = error_of("env.num_envs=abc")
    assert "env.num_envs = 'abc'" in msg
    assert "valid integer" in msg


def test_literal_field_lists_allowed_values():
    msg = error_of("actor.optimizer=rmsprop")
    assert "actor.optimizer = 'rmsprop'" in msg
    for allowed in ("'adam'", "'adamw'", "'sgd'"):
        assert allowed in msg


def test_bad_hidden_sizes():
    msg = error_of("model.hidden_sizes=[32,0]")
    assert "model.hidden_sizes = [32, 0]" in msg
    assert "layer widths from 1 to 65536" in msg


def test_every_error_listed_with_source():
    msg = error_of("actor.lr=-1", "run.max_iterations=0")
    assert msg.startswith("invalid configuration (")
    assert "ppo_cartpole.yaml" in msg.splitlines()[0]
    assert "actor.lr = -1" in msg and "run.max_iterations = 0" in msg


# -- unknown fields and sections -----------------------------------------------------------


def test_unknown_field_lists_allowed_fields_of_section():
    msg = error_of("actor.lrr=1")
    line = next(x for x in msg.splitlines() if "actor.lrr" in x)
    assert "unknown field" in line
    allowed = line.split("allowed fields here:")[1]
    names = {n.strip() for n in allowed.split(",")}
    assert {"lr", "optimizer", "num_minibatches", "update_epochs"} <= names
    assert "gamma" not in names  # algorithm's field, not actor's


def test_unknown_section_lists_sections():
    msg = error_of("actorr.lr=1")
    assert "actorr: unknown field" in msg
    for section in ("actor", "algorithm", "cluster", "env", "model", "run", "tracking"):
        assert re.search(rf"\b{section}\b", msg.split("allowed fields here:")[1])


# -- registered names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "field", "known"),
    [
        (
            "model.model_type=nope",
            "model.model_type",
            "hf_causal_lm, hf_reward_model, mlp_actor_critic",
        ),
        ("algorithm.adv_type=nope", "algorithm.adv_type", "dr_grpo, episode_grpo, gae, grpo"),
        ("algorithm.loss_type=nope", "algorithm.loss_type", "decoupled_ppo, ppo"),
        ("env.env_type=nope", "env.env_type", "gym"),
        (
            "reward.reward_type=nope",
            "reward.reward_type",
            "code_io, code_tests, composite, data_source, env, format, function",
        ),
    ],
)
def test_unknown_registered_name(override, field, known):
    msg = error_of(override)
    assert f"{field} = 'nope'" in msg
    assert f"known: {known}" in msg
    assert "RLPIPE_EXT_MODULE" in msg


def test_registered_names_are_case_insensitive():
    cfg = load_config(overrides=["algorithm.adv_type=GAE", "model.model_type=MLP_Actor_Critic"])
    assert cfg.algorithm.adv_type == "GAE"


def test_bad_gym_env_id_suggests_close_match():
    msg = error_of("env.env_id=CartPole-v9")
    assert "env.env_id = 'CartPole-v9'" in msg
    assert "did you mean CartPole-v1" in msg


def test_gym_env_id_not_checked_for_other_env_types():
    # with an unknown env_type only that error is reported, not a bogus env_id one
    msg = error_of("env.env_type=nope", "env.env_id=NotAGymId-v0")
    assert "env.env_type = 'nope'" in msg
    assert "NotAGymId" not in msg


# -- cross-field checks --------------------------------------------------------------------


def test_num_envs_multiple_of_group_size():
    msg = error_of("env.num_envs=6", "env.group_size=4")
    assert "env.num_envs (6) must be a multiple of env.group_size (4)" in msg
    cfg = load_config(overrides=["env.num_envs=8", "env.group_size=4"])
    assert cfg.env.group_size == 4


def test_batch_must_divide_into_minibatches():
    # 1 worker * 8 envs * 128 steps = 1024 samples, not divisible by 3
    msg = error_of("actor.num_minibatches=3")
    assert "batch of 1024 samples" in msg
    assert "actor.num_minibatches*actor.num_workers = 3" in msg
    # 1024 / 8 minibatches is fine; 8 envs * 100 steps = 800 is not a multiple of 64
    load_config(overrides=["actor.num_minibatches=8"])
    msg = error_of("rollout.num_steps=100", "actor.num_minibatches=64")
    assert "batch of 800 samples" in msg


# -- placement -----------------------------------------------------------------------------


def test_reversed_cpu_range():
    msg = error_of('cluster.component_placement={actor: "3-1"}')
    assert "cluster.component_placement" in msg
    assert "'3-1'" in msg
    assert "a range (0-3)" in msg


def test_unknown_component():
    msg = error_of("cluster.component_placement={learner: 0}")
    assert "cluster.component_placement" in msg
    assert "unknown component 'learner'" in msg
    assert "allowed: env, rollout, actor, reward, ref" in msg


def test_component_placed_twice():
    msg = error_of("cluster.component_placement={'actor,env': 0, actor: 1}")
    assert "component 'actor' is placed twice" in msg


def test_placement_all_is_accepted():
    cfg = load_config(overrides=["cluster.component_placement={'env,rollout': all, actor: 1}"])
    assert cfg.cluster.component_placement == {"env,rollout": "all", "actor": 1}


@pytest.mark.parametrize(
    ("spec", "cpus"),
    [("0-3", (0, 1, 2, 3)), ("2,0", (0, 2)), ("1", (1,)), (2, (2,)), ("0-1, 3", (0, 1, 3))],
)
def test_parse_cpu_set(spec, cpus):
    assert parse_cpu_set(spec) == cpus


@pytest.mark.parametrize("spec", ["", "a", "1-", "-1", "0,,1", True, -1])
def test_parse_cpu_set_rejects(spec):
    with pytest.raises(ValueError, match=r"index"):
        parse_cpu_set(spec)


def test_parse_component_placement_expands_lists():
    assert parse_component_placement({"env, rollout": "0", "actor": "1-2"}) == {
        "env": (0,),
        "rollout": (0,),
        "actor": (1, 2),
    }


# -- presets and override syntax -----------------------------------------------------------


def test_unknown_preset_lists_presets():
    msg = error_of(preset="ppo_cartpol")
    assert "'ppo_cartpol' is neither a preset nor a YAML file" in msg
    assert "presets: " in msg and "ppo_cartpole" in msg


def test_missing_yaml_path(tmp_path):
    msg = error_of(preset=str(tmp_path / "absent.yaml"))
    assert "absent.yaml" in msg and "neither a preset nor a YAML file" in msg


def test_invalid_yaml_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("actor: [1,\n")
    msg = error_of(preset=str(path))
    assert str(path) in msg and "not valid YAML" in msg


def test_yaml_file_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    msg = error_of(preset=str(path))
    assert "top level must be a mapping" in msg


def test_override_without_equals():
    msg = error_of("actor.lr")
    assert "override 'actor.lr' must look like section.field=value" in msg


def test_override_with_empty_field_name():
    msg = error_of("=3")
    assert "override '=3' has an empty field name" in msg


def test_override_invalid_yaml_value():
    msg = error_of("model.hidden_sizes=[32,")
    assert "override 'model.hidden_sizes=[32,'" in msg
    assert "not valid YAML" in msg


def test_single_trainer_worker_for_embodied_models():
    msg = error_of("actor.num_workers=2")
    assert "actor.num_workers = 2: the embodied MLP trainer is single-process" in msg


def test_grpo_rejected_for_the_embodied_ppo_trainer():
    msg = error_of("algorithm.adv_type=grpo")
    assert "per-step estimator" in msg and "gae" in msg


# -- reasoning (LLM) configs -----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from rl_core.models.tiny_lm import create_tiny_lm

    return str(create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1))


def _llm(tiny_model_dir, *extra):
    return [
        "model.model_type=hf_causal_lm",
        f"model.model_path={tiny_model_dir}",
        "algorithm.adv_type=grpo",
        "reward.reward_type=math_verify",
        *extra,
    ]


def test_reasoning_config_accepts_data_parallel_trainers(tiny_model_dir):
    cfg = load_config(overrides=_llm(tiny_model_dir, "actor.num_workers=2"))
    assert cfg.category == "reasoning" and cfg.actor.num_workers == 2
    assert cfg.actor.fsdp_config.wrap_policy.transformer_layer_cls_to_wrap == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["algorithm.adv_type=gae"], "reasoning models use 'token_gae'"),
        (["algorithm.adv_type=token_gae"], "'token_gae' needs model.value_head: true"),
        (["reward.reward_type=env"], "reward.reward_type = 'env' is the embodied env reward"),
        (["data.source=files"], "data.source = 'files' needs data.train_files"),
        (["data.prompt_template='Question {question}'"], "must contain '{prompt}'"),
        (["data.prompts_per_batch=3", "algorithm.group_size=3"], "the batch of 9 responses"),
        (["algorithm.loss_agg_mode=sum"], "algorithm.loss_agg_mode = 'sum'"),
        (["algorithm.kl_estimator=k5"], "'k1+'"),
        (["actor.fsdp_config.backend=mpi"], "actor.fsdp_config.backend = 'mpi'"),
        (["actor.fsdp_config.wrap_policy.layers=[X]"], "actor.fsdp_config.wrap_policy.layers"),
    ],
)
def test_reasoning_config_errors(tiny_model_dir, extra, expected):
    with pytest.raises(ConfigError) as err:
        load_config(overrides=_llm(tiny_model_dir, *extra))
    assert expected in str(err.value)


def test_hf_model_needs_a_local_model_directory(tmp_path):
    base = ("model.model_type=hf_causal_lm", "algorithm.adv_type=grpo", "reward.reward_type=format")
    msg = error_of(*base)
    assert "model.model_path is required" in msg
    msg = error_of(*base, f"model.model_path={tmp_path}")
    assert "is not a local Hugging Face model directory" in msg and "build_tiny_lm.py" in msg


def test_an_unknown_correction_lists_the_registered_ones():
    with pytest.raises(ConfigError) as err:
        load_config("grpo_arith", ["algorithm.is_correction=nope"])
    assert "algorithm.is_correction = 'nope'" in str(err.value)
    assert "known: mis, tis" in str(err.value)


def test_fields_of_the_other_category_are_refused_naming_who_reads_them():
    with pytest.raises(ConfigError) as err:
        load_config("ppo_cartpole", ["rollout.max_new_tokens=8", "data.eval_size=4"])
    assert sorted(str(err.value).splitlines()[1:]) == [
        "  data.eval_size: read by reasoning and reward_model runs only; this run's model "
        "(mlp_actor_critic) is embodied",
        "  rollout.max_new_tokens: read by reasoning runs only; this run's model "
        "(mlp_actor_critic) is embodied",
    ]
    with pytest.raises(ConfigError, match=r"env.num_envs: read by embodied runs only"):
        load_config("grpo_arith", ["env.num_envs=4"])
    # a field written with its default value changes nothing and passes
    load_config("grpo_arith", ["env.num_envs=8", "rollout.num_steps=128"])
