"""Rule-based math rewards: answer extraction, number parsing, matching and the registry."""

from fractions import Fraction

import numpy as np
import pytest

from rl_core.config import ConfigError, load_config
from rl_core.rewards import build_reward, get_reward
from rl_core.rewards.math_answers import (
    answers_match,
    extract_boxed,
    extract_final_answer,
    normalize_gold,
    parse_number,
)
from rl_core.rewards.reasoning import CompositeReward, FormatReward, math_verify_reward


def error_of(*overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config("grpo_arith", list(overrides))
    return str(info.value)


def reward_cfg(*overrides: str):
    # the reasoning preset: reasoning-only reward fields are refused on embodied configs
    return load_config("grpo_arith", list(overrides)).reward


def batch(completions, answers):
    return {
        "prompts": [f"q{i}" for i in range(len(completions))],
        "completions": list(completions),
        "answers": list(answers),
        "fields": [{} for _ in completions],
    }


# -- extract_boxed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{42}", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\sqrt{\frac{a}{b}} + {c}}", r"\sqrt{\frac{a}{b}} + {c}"),
        (r"first \boxed{1}, then \boxed{2}", "2"),
        (r"\boxed{1} and \fbox{3}", "3"),
        (r"\boxed { 7 }", "7"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\frac{1}{2}", None),  # unbalanced
        (r"\boxed{5} then \boxed{6", None),  # the last box is never closed
        ("no box here 12", None),
        ("", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


# -- extract_final_answer --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The answer is 5 but \boxed{6}", "6"),
        ("So she has 12 eggs.\n#### 1,234", "1,234"),
        ("#### 72\nsome trailing text 99", "72"),
        ("#### 1\n#### 2", "2"),
        ("The answer is 7.", "7"),
        ("Therefore the answer is 3.5.", "3.5"),
        ("Answer: 42", "42"),
        ("answer: B", "B"),
        ("The final answer is **9**", "9"),
        ("The answer is 18 dollars.", "18"),
        (r"The answer is $\frac{1}{2}$.", r"$\frac{1}{2}$"),
        ("She buys 3 apples and 4 pears, 7 fruits in total.", "7"),
        ("The temperature drops to -5 degrees", "-5"),
        ("5-3 = 2", "2"),
        ("It costs 1,234.50 overall", "1,234.50"),
        ("half is 1/2", "1/2"),
        (r"so it is $\frac{3}{4}$ of the cake", r"\frac{3}{4}"),
        ("nothing numeric here", None),
        ("", None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Natalia sold 48/2 = 24 clips in May.\n#### 72", "72"),
        ("#### 1,234", "1,234"),
        ("  5  ", "5"),
        (r"\frac{1}{2}", r"\frac{1}{2}"),
    ],
)
def test_normalize_gold(answer, expected):
    assert normalize_gold(answer) == expected


# -- parse_number ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", Fraction(42)),
        ("-3", Fraction(-3)),
        ("3.50", Fraction(7, 2)),
        ("0.1", Fraction(1, 10)),
        (".5", Fraction(1, 2)),
        ("1,234", Fraction(1234)),
        ("1,234,567.5", Fraction(2469135, 2)),
        ("$12", Fraction(12)),
        (r"\$12", Fraction(12)),
        ("-$5", Fraction(-5)),
        ("12%", Fraction(12)),
        (r"12\%", Fraction(12)),
        ("3/4", Fraction(3, 4)),
        ("-3/4", Fraction(-3, 4)),
        (r"\frac{3}{4}", Fraction(3, 4)),
        (r"\dfrac{3}{4}", Fraction(3, 4)),
        (r"\tfrac12", Fraction(1, 2)),
        (r"-\frac{1}{2}", Fraction(-1, 2)),
        (r"\frac{-1}{2}", Fraction(-1, 2)),
        ("42.", Fraction(42)),
        ("  7  ", Fraction(7)),
        ("$5$", Fraction(5)),
        (r"$-\frac{1}{2}$", Fraction(-1, 2)),
        (r"5 \text{ apples}", Fraction(5)),
        (r"$12 \text{ dollars}$.", Fraction(12)),
        (r"90^\circ", Fraction(90)),
        ("abc", None),
        ("", None),
        ("1/0", None),
        ("--3", None),
        ("3 apples", None),
        (r"\frac{\sqrt{2}}{2}", None),
        ("1e5", None),
        (None, None),
    ],
)
def test_parse_number(text, expected):
    assert parse_number(text) == expected


# -- answers_match ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("1,234", "1234", True),
        ("0.5", r"\frac{1}{2}", True),
        (r"\dfrac{1}{2}", "1/2", True),
        ("1/3", "0.333", False),
        ("0.333", "1/3", False),
        ("0.3333333", "1/3", True),  # long decimal: within the relative tolerance
        ("1000000.5", "1000000", False),  # short decimals compare exactly
        ("-3", "-3.0", True),
        ("-3", "3", False),
        ("$12", "12", True),
        ("12%", "12", True),
        (r"5 \text{ apples}", "5", True),
        ("7.", "7", True),
        ("B", "b", True),
        (r"\text{B}", "B", True),
        ("B", "C", False),
        (r"\left( 1, 2 \right)", "(1,2)", True),
        (r"\frac{\sqrt{2}}{2}", r"\dfrac{\sqrt{2}}{2}", True),
        ("x + 1", "x+1", True),
        (None, "5", False),
        ("", "", False),
    ],
)
def test_answers_match(predicted, gold, expected):
    assert answers_match(predicted, gold) is expected


def test_answers_match_rel_tol_is_relative_to_gold():
    # |p - g| = 1e-6; tolerance 1e-13 * 2e6 = 2e-7 (too small), 1e-12 * 2e6 = 2e-6 (enough)
    assert answers_match("2000000.000001", "2000000", rel_tol=1e-13) is False
    assert answers_match("2000000.000001", "2000000", rel_tol=1e-12) is True


# -- math_verify -----------------------------------------------------------------------------


def test_math_verify_on_a_batch():
    completions = [
        r"3 + 4 = 7, so \boxed{7}",  # right
        "48/2 = 24 and 48 + 24 = 72.\n#### 72",  # right, GSM8K style
        "The answer is 1,234.",  # right with commas vs gold 1234
        r"\boxed{0.5}",  # right: 0.5 == 1/2
        r"\boxed{8}",  # wrong
        "I am not sure.",  # no answer
        "so 1/3 is about 0.333",  # last number 0.333 != 1/3
    ]
    answers = ["7", "blah\n#### 72", "1234", r"\frac{1}{2}", "7", "3", "1/3"]
    out = math_verify_reward(**batch(completions, answers), scale=1.0)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [1, 1, 1, 1, 0, 0, 0])


def test_math_verify_scale_and_extra_keywords():
    out = math_verify_reward(
        **batch([r"\boxed{2}", r"\boxed{3}"], ["2", "2"]), scale=0.5, rewards=None, step=3
    )
    np.testing.assert_array_equal(out, np.array([0.5, 0.0], dtype=np.float32))


def test_math_verify_empty_batch():
    assert math_verify_reward(**batch([], [])).shape == (0,)


def test_length_mismatch_names_lengths():
    with pytest.raises(ValueError, match="got 2, 1 and 2"):
        math_verify_reward(prompts=["a", "b"], completions=["1"], answers=["1", "2"])


def test_math_verify_is_registered_as_function():
    assert get_reward("math_verify") is math_verify_reward
    assert build_reward(reward_cfg("reward.reward_type=math_verify")) is math_verify_reward


# -- format ----------------------------------------------------------------------------------


def test_format_reward_default_pattern():
    fn = build_reward(reward_cfg("reward.reward_type=format"))
    assert isinstance(fn, FormatReward)
    completions = [r"so \boxed{3}", "work\n#### 5", "the answer is 5", r"\boxed{}", "####"]
    out = fn(**batch(completions, ["3"] * 5), scale=2.0)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2, 2, 0, 0, 0])


def test_format_reward_custom_pattern_uses_dotall():
    fn = build_reward(
        reward_cfg("reward.reward_type=format", "reward.format_pattern='<think>.*</think>'")
    )
    out = fn(**batch(["<think>a\nb</think> 4", "<think>open", "4"], ["4"] * 3))
    np.testing.assert_array_equal(out, [1, 0, 0])


# -- composite -------------------------------------------------------------------------------


def test_composite_weights_components():
    cfg = reward_cfg(
        "reward.reward_type=composite", "reward.components={math_verify: 1.0, format: 0.1}"
    )
    fn = build_reward(cfg)
    assert isinstance(fn, CompositeReward)
    completions = [
        r"\boxed{4}",  # correct and formatted: 1.0 + 0.1
        "The answer is 4.",  # correct, not formatted: 1.0
        r"\boxed{5}",  # wrong but formatted: 0.1
        "no idea",  # 0
    ]
    out = fn(**batch(completions, ["4"] * 4), scale=1.0)
    assert out.dtype == np.float32 and out.shape == (4,)
    np.testing.assert_allclose(out, [1.1, 1.0, 0.1, 0.0], rtol=1e-6)


def test_composite_passes_scale_to_components():
    cfg = reward_cfg(
        "reward.reward_type=composite", "reward.components={math_verify: 2.0, format: -0.5}"
    )
    out = build_reward(cfg)(**batch([r"\boxed{4}", r"\boxed{5}"], ["4", "4"]), scale=0.5)
    # 2.0 * 0.5 - 0.5 * 0.5 = 0.75 and 0 - 0.25
    np.testing.assert_allclose(out, [0.75, -0.25], rtol=1e-6)


def test_composite_rejects_itself():
    cfg = reward_cfg("reward.reward_type=composite").model_copy(
        update={"components": {"composite": 1.0}}
    )
    with pytest.raises(ValueError, match="cycle: 'composite' -> 'composite'"):
        build_reward(cfg)


def test_composite_rejects_env_and_empty_components():
    base = reward_cfg("reward.reward_type=composite")
    with pytest.raises(ValueError, match="needs reward.components"):
        build_reward(base)
    with pytest.raises(ValueError, match="'env' is the embodied env reward"):
        build_reward(base.model_copy(update={"components": {"env": 1.0}}))


# -- config ----------------------------------------------------------------------------------


def test_config_defaults():
    cfg = load_config("grpo_arith").reward
    assert cfg.components == {}
    assert cfg.format_pattern == r"\\boxed\{.+?\}|####\s*\S+"


def test_bad_format_pattern_names_field():
    msg = error_of("reward.format_pattern='(unclosed'")
    assert "reward.format_pattern = '(unclosed'" in msg
    assert "not a valid regular expression" in msg
    assert "missing )" in msg


def test_unknown_component_lists_known_rewards():
    msg = error_of("reward.components={math_verify: 1.0, nope: 0.5}")
    line = next(x for x in msg.splitlines() if "reward.components" in x)
    assert "unknown reward 'nope'" in line
    assert "known: code_io, code_tests, composite, data_source, env, format, function" in line


@pytest.mark.parametrize(
    ("override", "text"),
    [
        ("reward.components={composite: 1.0}", "cannot contain 'composite'"),
        ("reward.components={math_verify: .inf}", "math_verify = inf: Input should be a finite"),
        ("reward.components={math_verify: abc}", "valid number"),
    ],
)
def test_bad_components(override, text):
    msg = error_of(override)
    assert "reward.components" in msg
    assert text in msg
