"""Bad numbers never reach training: non-finite floats, oversized counts and a rollout buffer
larger than the machine are config errors naming the field, the value and what is allowed."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from rl_core.config import ConfigError, limits, load_config
from rl_core.config.limits import format_bytes, machine_memory_bytes

#: Integer fields that are not counts or sizes, so they have no upper bound.
UNBOUNDED_INTS = {("run", "seed"), ("data", "arithmetic_max_operand")}

#: A reasoning config that validates without a model on disk (tiny_init creates it later).
REASONING = [
    "model.model_type=hf_causal_lm",
    "model.model_path=/nonexistent/tiny",
    "model.tiny_init=true",
    "algorithm.adv_type=grpo",
    "reward.reward_type=math_verify",
]


def error_lines(*overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(overrides=list(overrides))
    return str(info.value).splitlines()[1:]


def _kind_configs() -> dict[str, type[BaseModel]]:
    from rl_core.kind import kind_named

    return {name: kind_named(name).config for name in ("embodied", "reasoning")}


def fields_of(kind: type) -> list[tuple[str, str, str]]:
    """(kind of training, section path, field) of every field typed ``kind`` or ``kind | None``.

    A field both kinds share is listed once, under the embodied kind.
    """
    found: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()

    def walk(model: type[BaseModel], prefix: str, training: str) -> None:
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.", training)
            elif annotation is kind or (
                typing.get_origin(annotation) in (typing.Union, types.UnionType)
                and kind in typing.get_args(annotation)
            ):
                key = (prefix.rstrip("."), name)
                if key not in seen:
                    seen.add(key)
                    found.append((training, *key))

    for training, config in _kind_configs().items():
        walk(config, "", training)
    return found


# -- non-finite floats -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("actor.lr=.inf", "  actor.lr = inf: Input should be a finite number"),
        ("reward.scale=.nan", "  reward.scale = nan: Input should be a finite number"),
        (
            "model.init_log_std=-.inf",
            "  model.init_log_std = -inf: Input should be a finite number",
        ),
        (
            "reward.components={math_verify: .nan}",
            "  reward.components.math_verify = nan: Input should be a finite number",
        ),
        (
            "env.kwargs={gravity: 9.8, wind: [0.0, .inf]}",
            "  env.kwargs = {'gravity': 9.8, 'wind': [0.0, inf]}: numbers must be finite; "
            "found inf at ['wind'][1]",
        ),
        (
            "model.my_gain={scale: .nan}",
            "  model.my_gain = {'scale': nan}: numbers must be finite; found nan at ['scale']",
        ),
    ],
)
def test_non_finite_numbers_are_rejected_with_field_and_value(override, line):
    assert error_lines(override) == [line]


@pytest.mark.parametrize(("training", "section", "name"), fields_of(float))
@pytest.mark.parametrize("bad", [".inf", "-.inf", ".nan"])
def test_every_float_field_rejects_inf_and_nan(training, section, name, bad):
    field = f"{section}.{name}" if section else name
    value = bad.replace(".", "", 1)
    base = REASONING if training == "reasoning" else []
    lines = error_lines(*base, f"{field}={bad}")
    assert f"  {field} = {value}: Input should be a finite number" in lines


def test_finite_values_in_free_form_fields_are_kept():
    cfg = load_config(overrides=["env.kwargs={g: 9.8, xs: [1, 2.5, {y: -3.0}]}", "model.w=0.5"])
    assert cfg.env.kwargs == {"g": 9.8, "xs": [1, 2.5, {"y": -3.0}]}
    assert cfg.model.model_extra == {"w": 0.5}


# -- upper bounds of counts and sizes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "env.num_envs=1000000000",
            "  env.num_envs = 1000000000: Input should be less than or equal to 65536",
        ),
        (
            "env.num_workers=5000",
            "  env.num_workers = 5000: Input should be less than or equal to 1024",
        ),
        (
            "rollout.num_steps=2000000",
            "  rollout.num_steps = 2000000: Input should be less than or equal to 1000000",
        ),
        (
            "actor.update_epochs=1001",
            "  actor.update_epochs = 1001: Input should be less than or equal to 1000",
        ),
        (
            "actor.num_minibatches=100000",
            "  actor.num_minibatches = 100000: Input should be less than or equal to 65536",
        ),
        (
            "eval.num_episodes=2000000",
            "  eval.num_episodes = 2000000: Input should be less than or equal to 1000000",
        ),
        (
            "model.hidden_sizes=[64, 100000]",
            "  model.hidden_sizes = [64, 100000]: must be a "
            "non-empty list of layer widths from 1 to 65536",
        ),
    ],
)
def test_oversized_counts_are_rejected_with_the_bound(override, line):
    assert error_lines(override) == [line]


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "data.prompts_per_batch=100000",
            "  data.prompts_per_batch = 100000: Input should be less than or equal to 65536",
        ),
        (
            "algorithm.group_size=2048",
            "  algorithm.group_size = 2048: Input should be less than or equal to 1024",
        ),
        (
            "rollout.max_new_tokens=2000000",
            "  rollout.max_new_tokens = 2000000: Input should be less than or equal to 1048576",
        ),
    ],
)
def test_oversized_reasoning_sizes_are_rejected_with_the_bound(override, line):
    assert error_lines(*REASONING, override) == [line]


@pytest.mark.parametrize(
    ("training", "section", "name"),
    [f for f in fields_of(int) if f[1:] not in UNBOUNDED_INTS],
)
def test_every_count_has_an_upper_bound(training, section, name):
    model: type[BaseModel] = _kind_configs()[training]
    for part in section.split("."):
        model = model.model_fields[part].annotation
    field = model.model_fields[name]
    bounds = [getattr(m, "le", None) for m in field.metadata] + [
        getattr(m, "lt", None) for m in field.metadata
    ]
    assert any(b is not None for b in bounds), f"{section}.{name} has no upper bound"


# -- the rollout buffer against the machine's memory --------------------------------------------


def test_rollout_buffer_larger_than_memory_is_rejected(monkeypatch):
    monkeypatch.setattr(limits, "machine_memory_bytes", lambda: 2**30)
    load_config(overrides=["env.num_envs=512", "rollout.num_steps=16384"])  # 0.5 GiB: fits
    lines = error_lines("env.num_envs=512", "rollout.num_steps=65536")
    assert lines == [
        "  the rollout buffer needs at least 2.0 GiB (env.num_workers*env.num_envs*rollout."
        "num_steps = 1*512*65536 = 33,554,432 env steps x 64 bytes), more than this machine's "
        "1.0 GiB of memory; lower env.num_workers, env.num_envs or rollout.num_steps"
    ]


def test_reasoning_buffer_larger_than_memory_is_rejected(monkeypatch):
    monkeypatch.setattr(limits, "machine_memory_bytes", lambda: 2**30)
    load_config(overrides=REASONING)
    lines = error_lines(*REASONING, "data.prompts_per_batch=4096", "rollout.max_new_tokens=16384")
    assert lines == [
        "  the rollout buffer needs at least 8.0 GiB (data.prompts_per_batch*algorithm."
        "group_size*(data.max_prompt_length+rollout.max_new_tokens) = 4096*8*(64+16384) = "
        "538,968,064 tokens x 16 bytes), more than this machine's 1.0 GiB of memory; lower "
        "data.prompts_per_batch, algorithm.group_size, data.max_prompt_length or "
        "rollout.max_new_tokens"
    ]


def test_the_largest_allowed_sizes_exceed_any_machine():
    lines = error_lines("env.num_workers=1024", "env.num_envs=65536", "rollout.num_steps=1000000")
    assert len(lines) == 1 and lines[0].startswith("  the rollout buffer needs at least 3.8 PiB")


def test_unknown_memory_skips_the_estimate(monkeypatch):
    monkeypatch.setattr(limits, "machine_memory_bytes", lambda: None)
    cfg = load_config(overrides=["env.num_envs=65536", "rollout.num_steps=1000000"])
    assert cfg.env.num_envs == 65536


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="needs Linux /proc/meminfo")
def test_machine_memory_comes_from_sysconf_pages():
    memory = machine_memory_bytes()
    assert memory is not None and memory > 2**26  # any machine that runs these tests
    with open("/proc/meminfo") as meminfo:  # MemTotal is a little below the physical pages
        total_kib = int(meminfo.readline().split()[1])
    assert total_kib * 1024 <= memory < total_kib * 1024 * 1.1


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 2**30, "3.0 GiB")]
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_skip_limit_default_and_bounds():
    assert load_config().actor.max_skipped_updates_in_a_row == 3
    assert error_lines("actor.max_skipped_updates_in_a_row=0") == [
        "  actor.max_skipped_updates_in_a_row = 0: Input should be greater than or equal to 1"
    ]
