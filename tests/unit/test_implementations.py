"""Registries of implementations that live in infra: names in rl_core, objects resolved late."""

from __future__ import annotations

import pytest

from rl_core.llm.implementations import ROLLOUT_ENGINES, TRAINER_BACKENDS, resolve
from rl_core.registry import RegistryError
from rl_core.training.schedules import LR_SCHEDULES


def test_builtin_names_are_references_into_infra() -> None:
    assert ROLLOUT_ENGINES.names() == ["hf", "vllm"]
    assert TRAINER_BACKENDS.names() == ["fsdp", "megatron"]
    assert all(ROLLOUT_ENGINES.get(n).startswith("infra.") for n in ROLLOUT_ENGINES.names())


def test_resolve_imports_a_reference_and_passes_objects_through() -> None:
    assert resolve("rl_core.training.schedules:LR_SCHEDULES") is LR_SCHEDULES
    marker = object()
    assert resolve(marker) is marker


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("rl_core.training.schedules", "not a 'module:attribute' reference"),
        ("rl_core.training.schedules:nope", "has no attribute 'nope'"),
    ],
)
def test_a_bad_reference_is_refused(reference: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        resolve(reference)


def test_the_engine_registry_is_the_one_infra_builds_from() -> None:
    from infra.llm.engines import ENGINES, HFEngine

    assert ENGINES is ROLLOUT_ENGINES
    assert resolve(ENGINES.get("hf")) is HFEngine


def test_the_backend_registry_is_the_one_infra_builds_from() -> None:
    from infra.llm.trainer_backends import TRAINER_BACKENDS as INFRA_BACKENDS
    from infra.llm.trainer_backends import FSDPBackend

    assert INFRA_BACKENDS is TRAINER_BACKENDS
    assert resolve(TRAINER_BACKENDS.get("FSDP")) is FSDPBackend


def test_schedule_names_keep_their_registration_order() -> None:
    assert LR_SCHEDULES.names(in_registration_order=True) == ["constant", "linear", "cosine"]
    assert LR_SCHEDULES.names() == ["constant", "cosine", "linear"]


def test_a_registered_config_field_takes_any_case_and_keeps_the_registered_name() -> None:
    from rl_core.config import load_config

    cfg = load_config(overrides=["actor.optimizer=AdamW", "actor.lr_schedule=Cosine"])
    assert (cfg.actor.optimizer, cfg.actor.lr_schedule) == ("adamw", "cosine")
