"""One name per algorithm: MLflow tag, Prefect tags and prefect.yaml deployments agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.prefect_ui import run_tags
from infra.driver.session import identity_tags
from rl_core.algorithms.naming import algorithm_name, register_algorithm_name
from rl_core.config import available_presets, load_config

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "ppo_cartpole": "ppo",
    "ppo_pendulum": "ppo",
    "sac_pendulum": "sac",
    "sac_inverted_pendulum": "sac",
    "crossq_pendulum": "crossq",
    "rlpd_pendulum": "rlpd",
    "grpo_arith": "grpo",
    "grpo_arith_megatron": "grpo",
    "grpo_arith_lora": "grpo",
    "grpo_arith_rm": "grpo",
    "grpo_gsm8k_qwen05b": "grpo",
    "dapo_arith": "dapo",
    "reinforce_pp_arith": "reinforce_pp",
    "sft_arith": "sft",
    "agent_calc": "grpo",
    "code_tests": "grpo",
    "code_humaneval": "grpo",
    "sft_agent_calc": "sft",
    "sft_code_tests": "sft",
    "rm_arith": "bradley_terry",
    "online_arith": "reinforce",
    "ppo_metaworld": "ppo",
    "ppo_pushcube": "ppo",
    "sft_mlp_metaworld": "sft",
    "sft_vla_metaworld": "sft",
    "grpo_vla_metaworld": "grpo",
    "sft_vla_pickcube": "sft",
    "sft_vla_libero": "sft",
    "grpo_vla_pickcube": "grpo",
    "grpo_vla_libero": "grpo",
    "iql_metaworld": "iql",
    "sft_mlp_metaworld_mixed": "sft",
}


def _preset_deployments() -> list[dict]:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    training = ("flows/train.py:", "flows/sft.py:")
    return [d for d in spec["deployments"] if d["entrypoint"].startswith(training)]


def _supervised(deployment: dict) -> bool:
    return deployment["entrypoint"].startswith("flows/sft.py")


def test_every_preset_has_a_deployment_with_its_expected_name():
    presets = set(available_presets())
    deployed = {d["parameters"]["preset"] for d in _preset_deployments()}
    assert presets == set(EXPECTED) == deployed


@pytest.mark.parametrize("deployment", _preset_deployments(), ids=lambda d: d["name"])
def test_prefect_mlflow_and_deployment_names_agree(deployment):
    preset = deployment["parameters"]["preset"]
    supervised = _supervised(deployment)
    cfg = load_config(preset, ["run.name=r"])
    name = algorithm_name(cfg.algorithm, supervised=supervised)
    assert name == EXPECTED[preset]
    yaml_tags = [t for t in deployment["tags"] if t.startswith("algorithm:")]
    assert yaml_tags == [f"algorithm:{name}"], deployment["name"]
    assert f"algorithm:{name}" in run_tags(cfg, supervised)
    assert identity_tags(cfg, supervised)["rlpipe.algorithm"] == name


def test_dynamic_sampling_makes_a_group_run_dapo_only():
    grpo = load_config("grpo_arith").algorithm
    assert algorithm_name(grpo.model_copy(update={"dynamic_sampling": True})) == "dapo"
    rpp = load_config("reinforce_pp_arith").algorithm
    assert algorithm_name(rpp.model_copy(update={"dynamic_sampling": True})) == "reinforce_pp"


def test_extension_estimators_go_by_their_registered_name_or_the_one_given():
    algorithm = load_config("grpo_arith").algorithm.model_copy(
        update={"adv_type": "test_names_only_adv"}
    )
    assert algorithm_name(algorithm) == "test_names_only_adv"
    register_algorithm_name("test_names_only_adv", "test_names_only_method")
    assert algorithm_name(algorithm) == "test_names_only_method"
