"""The public registration API (rl_core.api) and RLPIPE_EXT_MODULE loading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infra.extensions import ExtensionError, load_extension_modules
from rl_core import api
from rl_core.config import ConfigError, load_config
from rl_core.registries import registry_for
from rl_core.registry import RegistryError
from rl_core.rewards import build_reward
from tests.env_vars import unset

ROOT = Path(__file__).resolve().parents[2]
EXT_DIR = ROOT / "tests" / "fixtures" / "ext_modules"
KINDS = ["model", "env", "advantage", "policy_loss", "reward"]


def _builder(cfg, spaces):
    from rl_core.models.mlp_actor_critic import build_mlp_actor_critic

    return build_mlp_actor_critic(cfg, spaces)


def _other(*args, **kwargs):
    return None


REGISTER = {
    "model": lambda name, obj, **kw: api.register_model(name, obj, "embodied", **kw),
    "env": lambda name, obj, **kw: api.register_env(name, obj, **kw),
    "advantage": lambda name, obj, **kw: api.register_advantage(name, obj, **kw),
    "policy_loss": lambda name, obj, **kw: api.register_policy_loss(name, obj, **kw),
    "reward": lambda name, obj, **kw: api.register_reward(name, obj, **kw),
}
BUILTIN = {
    "model": "mlp_actor_critic",
    "env": "gym",
    "advantage": "gae",
    "policy_loss": "ppo",
    "reward": "env",
}
CONFIG_FIELD = {
    "model": "model.model_type",
    "env": "env.env_type",
    "advantage": "algorithm.adv_type",
    "policy_loss": "algorithm.loss_type",
    "reward": "reward.reward_type",
}


@pytest.fixture(autouse=True)
def isolated(clean_registries, monkeypatch):
    """Registrations and loaded modules of a test do not leak into the next one."""
    monkeypatch.syspath_prepend(str(EXT_DIR))
    yield
    for name in ("ext_counting", "ext_broken_import", "ext_broken_register"):
        sys.modules.pop(name, None)


def _entry(kind, name):
    entry = registry_for(kind).get(name)
    return entry.builder if kind == "model" else entry


@pytest.mark.parametrize("kind", KINDS)
def test_duplicate_name_names_the_existing_entry(kind):
    REGISTER[kind]("test_dup", _builder)
    with pytest.raises(RegistryError) as err:
        REGISTER[kind]("TEST_DUP", _other)
    msg = str(err.value)
    assert "'test_dup' is already registered as" in msg
    assert "test_extension_api._builder" in msg and "force=True" in msg
    assert _entry(kind, "test_dup") is _builder  # the first registration stays


@pytest.mark.parametrize("kind", KINDS)
def test_force_swaps_a_builtin_keeping_its_name(kind):
    name = BUILTIN[kind]
    REGISTER[kind](name, _other, force=True)
    assert _entry(kind, name) is _other
    # configs naming the built-in now get the replacement; validation still accepts it
    load_config(overrides=[f"{CONFIG_FIELD[kind]}={name}"])


@pytest.mark.parametrize("kind", KINDS)
def test_same_object_registers_twice_without_error(kind):
    REGISTER[kind]("test_twice", _builder)
    REGISTER[kind]("test_twice", _builder)
    assert _entry(kind, "test_twice") is _builder


@pytest.mark.parametrize("kind", KINDS)
def test_config_accepts_registered_and_rejects_unknown_names(kind):
    field = CONFIG_FIELD[kind]
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[f"{field}=test_custom_{kind}"])
    msg = str(err.value)
    assert f"{field} = 'test_custom_{kind}'" in msg
    assert BUILTIN[kind] in msg and "RLPIPE_EXT_MODULE" in msg
    REGISTER[kind](f"test_custom_{kind}", _builder)
    cfg = load_config(overrides=[f"{field}=test_custom_{kind}"])
    section, key = field.split(".")
    assert getattr(getattr(cfg, section), key) == f"test_custom_{kind}"


def test_decorator_forms():
    @api.register_model("test_deco_model", category="reasoning")
    def build(cfg, spaces):
        return None

    @api.register_env("test_deco_env")
    def make(env_cfg, render_mode=None):
        return None

    @api.register_reward("test_deco_reward")
    def reward(rewards, **_):
        return rewards

    @api.register_advantage("test_deco_adv")
    def adv(**_):
        return None

    @api.register_policy_loss("test_deco_loss")
    def loss(**_):
        return None

    assert registry_for("model").get("test_deco_model").category == "reasoning"
    assert registry_for("model").get("test_deco_model").builder is build
    assert registry_for("env").get("test_deco_env") is make
    assert registry_for("reward").get("test_deco_reward") is reward
    assert registry_for("advantage").get("test_deco_adv") is adv
    assert registry_for("policy_loss").get("test_deco_loss") is loss


def test_register_model_rejects_unknown_category():
    with pytest.raises(ValueError, match="category must be a lowercase identifier"):
        api.register_model("test_cat", _builder, category="robotics/arm")


def test_reward_class_is_instantiated_once_with_the_reward_config():
    class Scaled:
        def __init__(self, reward_cfg):
            self.factor = reward_cfg.scale * 10

        def __call__(self, rewards, scale=1.0, **_):
            return rewards * self.factor

    api.register_reward("test_class_reward", Scaled)
    cfg = load_config(overrides=["reward.reward_type=test_class_reward", "reward.scale=0.5"])
    fn = build_reward(cfg.reward)
    assert isinstance(fn, Scaled)
    np.testing.assert_allclose(fn(rewards=np.ones(3)), [5.0, 5.0, 5.0])


def test_reward_class_without_call_is_rejected():
    class NotCallable:
        def __init__(self, reward_cfg):
            pass

    api.register_reward("test_not_callable", NotCallable)
    cfg = load_config(overrides=["reward.reward_type=test_not_callable"])
    with pytest.raises(TypeError, match=r"must define __call__"):
        build_reward(cfg.reward)


def test_force_registration_before_builtins_load_survives_them():
    """A user module may register before anything imported rlpipe's built-ins."""
    code = (
        "from rl_core.algorithms.registry import register_advantage, get_advantage\n"
        "def mine(**kw): return None\n"
        "register_advantage('gae', mine, force=True)\n"
        "from rl_core.registries import load_builtins\n"
        "load_builtins()\n"
        "assert get_advantage('gae') is mine, get_advantage('gae')\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# -- RLPIPE_EXT_MODULE ------------------------------------------------------------------------
def test_ext_module_from_env_registers_every_kind(monkeypatch):
    monkeypatch.setenv("RLPIPE_EXT_MODULE", " ext_counting , ")
    assert load_extension_modules() == ["ext_counting"]
    for kind, name in [
        ("env", "ext_counting_env"),
        ("model", "ext_counting_model"),
        ("reward", "ext_counting_reward"),
        ("advantage", "ext_counting_adv"),
        ("policy_loss", "ext_counting_loss"),
    ]:
        assert name in registry_for(kind)
    # once per process: a second call neither re-imports nor re-registers
    assert load_extension_modules() == []
    assert sys.modules["ext_counting"].CALLS == [1]


def test_several_modules_comma_separated(monkeypatch):
    monkeypatch.setenv("RLPIPE_EXT_MODULE", "ext_counting,json")
    assert load_extension_modules() == ["ext_counting", "json"]


def test_unset_variable_loads_nothing(monkeypatch):
    unset(monkeypatch, "RLPIPE_EXT_MODULE")
    assert load_extension_modules() == []


@pytest.mark.parametrize(
    ("module", "original"),
    [
        (
            "ext_broken_import",
            "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'",
        ),
        ("ext_broken_register", "RuntimeError: register() refused: missing licence file"),
        ("no_such_ext_module", "ModuleNotFoundError: No module named 'no_such_ext_module'"),
    ],
)
def test_failing_module_names_module_and_original_error(module, original):
    with pytest.raises(ExtensionError) as err:
        load_extension_modules(f"ext_counting,{module}")
    assert f"RLPIPE_EXT_MODULE module {module!r} failed to load" in str(err.value)
    assert original in str(err.value)
    assert isinstance(err.value.__cause__, Exception)


def test_cli_stops_before_starting_anything_when_a_module_fails(tmp_path):
    env = {"RLPIPE_EXT_MODULE": "ext_counting,no_such_ext_module", "PYTHONPATH": str(EXT_DIR)}
    out = subprocess.run(
        [sys.executable, "flows/train.py", f"run.output_dir={tmp_path / 'out'}"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "RLPIPE_EXT_MODULE module 'no_such_ext_module' failed to load" in text
    assert "ModuleNotFoundError" in text
    assert not (tmp_path / "out").exists()  # no Prefect server, no Ray, no MLflow store
