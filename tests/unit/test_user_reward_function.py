"""Reward functions by path (``reward.function``: verl's and TRL's signatures) and the
``data_source`` reward that scores verl rows with the built-in reward their source names."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from kinds.reasoning.reward_scoring import score_chunk
from rl_core.config import load_config
from rl_core.config.loader import ConfigError
from rl_core.rewards import build_reward
from rl_core.rewards.user_function import RewardFunctionError, load_reward_function

VERL = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if "crash" in solution_str:
        raise ZeroDivisionError("boom in user code")
    if "text" in solution_str:
        return "not a number"
    bonus = 0.5 if extra_info and extra_info.get("hard") else 0.0
    return {"score": float(ground_truth in solution_str) + bonus, "acc": True}
"""

TRL = """
def reward_len(prompts, completions, **kwargs):
    if any("crash" in c for c in completions):
        raise ValueError("cannot score a crash")
    return [None if c == "skip" else -abs(len(c) - 5) for c in completions]

def reward_answer(completions, answer, level, **kwargs):
    return [float(a in c) + (0.1 if lv == "easy" else 0.0) for c, a, lv in zip(completions, answer, level)]

def not_a_reward(x, y):
    return 0
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def reward_cfg(target: str, *extra: str):
    return load_config(
        "grpo_arith", ["reward.reward_type=function", f"reward.function={target}", *extra]
    ).reward


def batch(completions, answers=None, fields=None):
    n = len(completions)
    return {
        "prompts": [f"question {i}" for i in range(n)],
        "completions": list(completions),
        "answers": list(answers or ["7"] * n),
        "fields": list(fields or [{} for _ in range(n)]),
    }


def test_verl_compute_score_per_row_with_its_extra_info_and_dict_scores(tmp_path):
    path = write(tmp_path, "verl_reward.py", VERL)
    fn = build_reward(reward_cfg(f"{path}:compute_score"))
    fields = [{"data_source": "openai/gsm8k", "extra_info": {"hard": True}}, {}]
    scores = fn(scale=2.0, **batch(["it is 7", "it is 8"], fields=fields))
    assert scores.tolist() == [3.0, 0.0]


def test_a_user_error_leaves_its_row_unscored_and_logs_row_and_traceback(tmp_path, caplog):
    path = write(tmp_path, "verl_reward.py", VERL)
    fn = build_reward(reward_cfg(f"{path}:compute_score"))
    scores = fn(scale=1.0, **batch(["7", "crash", "text"]))
    assert scores[0] == 1.0 and math.isnan(scores[1]) and math.isnan(scores[2])
    assert "2 of 3 responses not scored" in caplog.text
    assert "question 1" in caplog.text and "ZeroDivisionError: boom in user code" in caplog.text
    assert 'File "' in caplog.text  # the traceback itself


def test_a_batch_nothing_of_which_is_scored_stops_the_run(tmp_path):
    path = write(tmp_path, "verl_reward.py", VERL)
    fn = build_reward(reward_cfg(f"{path}:compute_score"))
    with pytest.raises(RewardFunctionError, match=r"(?s)scored none of 2.*ZeroDivisionError"):
        fn(scale=1.0, **batch(["crash", "crash again"]))
    with pytest.raises(RewardFunctionError, match="a score must be a number, got str"):
        fn(scale=1.0, **batch(["text"]))


def test_trl_reward_functions_get_the_rows_columns_and_none_means_unscored(tmp_path):
    path = write(tmp_path, "trl_rewards.py", TRL)
    fields = [{"level": "easy"}, {"level": "hard"}]
    answer = build_reward(reward_cfg(f"{path}:reward_answer"))
    assert answer(scale=1.0, **batch(["got 7", "no"], fields=fields)).tolist() == pytest.approx(
        [1.1, 0.0]
    )
    length = build_reward(reward_cfg(f"{path}:reward_len"))
    scores = length(scale=1.0, **batch(["12345", "skip", "123"]))
    assert scores[0] == 0.0 and math.isnan(scores[1]) and scores[2] == -2.0


def test_a_trl_batch_that_raises_is_scored_row_by_row(tmp_path, caplog):
    path = write(tmp_path, "trl_rewards.py", TRL)
    length = build_reward(reward_cfg(f"{path}:reward_len"))
    scores = length(scale=1.0, **batch(["12345", "crash", "1234"]))
    assert scores[0] == 0.0 and math.isnan(scores[1]) and scores[2] == -1.0
    assert "scoring it row by row" in caplog.text and "cannot score a crash" in caplog.text


def test_module_name_form_and_composite_weights_in_the_reward_tasks(tmp_path, monkeypatch):
    write(tmp_path, "my_rewards_pkg.py", TRL)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(
        "grpo_arith",
        [
            "reward.reward_type=composite",
            "reward.components={math_verify: 1.0, function: 0.5}",
            "reward.function=my_rewards_pkg:reward_len",
        ],
    ).reward
    # score_chunk is what the reward Ray tasks run
    scores = score_chunk(cfg.model_dump(mode="json"), batch(["#### 7", "#### 8"]))
    assert scores == pytest.approx([1.0 + 0.5 * -1.0, 0.5 * -1.0])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["reward.function=missing_file.py:f"], "no such file"),
        (["reward.function=no.such.module:f"], "importing no.such.module failed"),
        (["reward.function=plain"], "must be 'path/to/file.py:name'"),
        (["reward.function=trl_rewards.py:not_a_reward"], r"parameters \(x, y\): expected verl"),
        (["reward.function=trl_rewards.py:nothing"], "has no function 'nothing'"),
    ],
)
def test_bad_reward_functions_are_named_before_the_run(tmp_path, monkeypatch, overrides, message):
    write(tmp_path, "trl_rewards.py", TRL)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=rf"reward.function = .*{message}"):
        load_config("grpo_arith", ["reward.reward_type=function", *overrides])


def test_a_reward_function_must_be_used_once_set(tmp_path):
    path = write(tmp_path, "verl_reward.py", VERL)
    with pytest.raises(ConfigError, match="reward_type 'math_verify' does not use it"):
        load_config("grpo_arith", [f"reward.function={path}:compute_score"])
    assert load_reward_function(f"{path}:compute_score").style == "verl"


def test_data_source_scores_each_row_by_its_source_and_names_unknown_ones():
    cfg = load_config("grpo_arith", ["reward.reward_type=data_source"]).reward
    fn = build_reward(cfg)
    fields = [{"data_source": "openai/gsm8k"}, {"data_source": "lighteval/MATH"}]
    scores = fn(scale=1.0, **batch(["so #### 7", "\\boxed{8}"], answers=["7", "8"], fields=fields))
    assert scores.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"row 1 has data_source 'my/data'.*openai/gsm8k"):
        fn(scale=1.0, **batch(["7", "7"], fields=[fields[0], {"data_source": "my/data"}]))
    with pytest.raises(ValueError, match="row 0 has no data_source column"):
        fn(scale=1.0, **batch(["7"]))


def test_reasoning_runs_score_by_data_source_unless_a_reward_is_set():
    from kinds.reasoning.sections import ReasoningRewardConfig

    assert ReasoningRewardConfig().reward_type == "data_source"
    assert load_config("grpo_arith", []).reward.reward_type == "math_verify"
