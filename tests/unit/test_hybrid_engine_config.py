"""When a run uses the hybrid engine, and how an impossible ``cluster.hybrid_engine: on`` is
refused (naming the fields, before any worker starts)."""

import pytest

from rl_core.config import ConfigError, load_config
from rl_core.config.hybrid import hybrid_engine_blockers, uses_hybrid_engine


def test_default_collocated_runs_use_the_hybrid_engine():
    cfg = load_config()
    assert cfg.cluster.hybrid_engine == "auto"
    assert hybrid_engine_blockers(cfg) == []
    assert uses_hybrid_engine(cfg)


def test_auto_keeps_separate_workers_when_placement_or_counts_differ():
    split = load_config(None, ["cluster.component_placement={actor: '1', 'env,rollout': 0}"])
    assert not uses_hybrid_engine(split)
    assert "different CPUs" in hybrid_engine_blockers(split)[0]
    more = load_config(None, ["rollout.num_workers=2"])
    assert not uses_hybrid_engine(more)
    assert (
        "rollout.num_workers (2) differs from actor.num_workers (1)"
        in (hybrid_engine_blockers(more)[0])
    )


def test_off_keeps_separate_workers_and_yaml_booleans_read_as_on_off():
    assert not uses_hybrid_engine(load_config(None, ["cluster.hybrid_engine=off"]))
    assert load_config(None, ["cluster.hybrid_engine=true"]).cluster.hybrid_engine == "on"
    assert load_config(None, ["cluster.hybrid_engine=false"]).cluster.hybrid_engine == "off"


def test_on_with_disaggregated_placement_is_refused_naming_why():
    with pytest.raises(ConfigError) as info:
        load_config(
            None,
            [
                "cluster.hybrid_engine=on",
                "cluster.component_placement={actor: '1', 'env,rollout': 0}",
            ],
        )
    message = str(info.value)
    assert "cluster.hybrid_engine = 'on' is not possible" in message
    assert "rollout and actor on different CPUs" in message
    assert "allowed: 'auto' or 'off'" in message


def test_unknown_mode_names_the_allowed_values():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["cluster.hybrid_engine=sometimes"])
    assert "cluster.hybrid_engine" in str(info.value)
    assert "'auto', 'on' or 'off'" in str(info.value)


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_reasoning_runs_host_either_rollout_engine(engine: str) -> None:
    """vLLM lives in the trainer ranks too (it sleeps while they compute)."""
    cfg = load_config("grpo_arith", [f"rollout.engine={engine}"])
    assert hybrid_engine_blockers(cfg) == []
    assert uses_hybrid_engine(cfg)
    on = load_config("grpo_arith", [f"rollout.engine={engine}", "cluster.hybrid_engine=on"])
    assert uses_hybrid_engine(on)
