"""The online section: defaults, what an online run refuses, and which runtime trains it."""

from __future__ import annotations

import pytest

from rl_core.config import load_config
from rl_core.config.loader import ConfigError
from rl_core.kind import kind_of


def test_the_preset_is_an_online_reasoning_run() -> None:
    cfg = load_config("online_arith", [])
    assert cfg.online.enabled and cfg.online.host == "127.0.0.1"
    assert cfg.algorithm.group_size == 1 and cfg.algorithm.adv_type == "outcome"
    assert kind_of(cfg).name == "online" and cfg.category == "reasoning"
    assert kind_of(cfg).runtime_class(cfg).__name__ == "OnlineRuntime"
    reasoning = load_config("grpo_arith", [])
    assert kind_of(reasoning).runtime_class(reasoning).__name__ == "ReasoningRuntime"


def test_online_enabled_false_is_a_plain_reasoning_run() -> None:
    cfg = load_config("grpo_arith", ["online.enabled=false"])
    assert kind_of(cfg).name == "reasoning" and not hasattr(cfg, "online")


def test_online_settings_without_online_enabled_name_the_online_kind() -> None:
    with pytest.raises(ConfigError, match=r"online.port: read by online runs only"):
        load_config("online_arith", ["online.enabled=false"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.group_size=8", r"algorithm.group_size = 8 \(allowed: 1"),
        ("algorithm.adv_type=grpo", r"algorithm.adv_type = 'grpo' \(allowed: 'outcome'"),
        ("actor.lora.rank=4", r"actor.lora.rank = 4 \(allowed: 0"),
        ("online.baseline=median", r"unknown single-response baseline 'median'"),
        ("online.user.noise=0.5", r"online.user.noise"),
        ("online.batch_size=0", r"online.batch_size"),
        ("online.port=70000", r"online.port"),
        ("online.server=external", r"online.user.enabled = true needs online.server = run"),
        ("online.server=remote", r"online.server"),
    ],
)
def test_bad_online_settings_fail_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config("online_arith", [override])


def test_an_externally_served_run_has_no_simulated_user() -> None:
    cfg = load_config("online_arith", ["online.server=external", "online.user.enabled=false"])
    assert cfg.online.server == "external" and not cfg.online.user.enabled


def test_serving_beyond_loopback_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinds.online.runtime import OnlineRuntime

    monkeypatch.delenv("RLPIPE_SERVE_TOKEN", raising=False)
    cfg = load_config("online_arith", ["online.host=0.0.0.0"])
    with pytest.raises(ValueError, match=r"online.host = '0.0.0.0'.*\$RLPIPE_SERVE_TOKEN"):
        OnlineRuntime.preflight(cfg)
    OnlineRuntime.preflight(load_config("online_arith", []))  # loopback: no token needed
