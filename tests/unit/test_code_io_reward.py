"""``code_io``: verl's code rows (input/output cases in ``reward_model.ground_truth``) run in
the real sandbox, through standard input or a named function, and picked by data_source."""

from __future__ import annotations

import json
import math

import pytest

from rl_core.config import load_config
from rl_core.rewards import build_reward
from rl_core.rewards.code_io import io_cases, solution_code

STDIN_CASES = {"inputs": ["1 2\n", "10 -3\n", "0 0\n"], "outputs": ["3\n", "7", "0\n"]}
FN_CASES = {"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [3, 10]}


def row(truth: dict, as_text: bool = True, source: str = "apps") -> dict:
    ground_truth = json.dumps(truth) if as_text else truth
    return {"data_source": source, "reward_model": {"style": "rule", "ground_truth": ground_truth}}


def score(reward_type: str, completions: list[str], fields: list[dict]) -> list[float]:
    cfg = load_config("code_tests", [f"reward.reward_type={reward_type}"]).reward
    fn = build_reward(cfg)
    n = len(completions)
    return fn(
        prompts=["p"] * n, completions=completions, answers=["a"] * n, fields=fields, scale=1.0
    ).tolist()


def test_stdin_programs_score_the_fraction_of_cases_they_pass():
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    half = "a, b = map(int, input().split())\nprint(a + b if b >= 0 else 0)"
    crash = "```python\nraise SystemError('no')\n```"
    scores = score("code_io", [right, half, crash], [row(STDIN_CASES)] * 3)
    assert scores == pytest.approx([1.0, 2 / 3, 0.0])


def test_function_cases_call_a_function_or_a_solution_method():
    plain = "def add(a, b):\n    return a + b"
    method = "```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```"
    wrong = "def add(a, b):\n    return a * b"
    fields = [row(FN_CASES, as_text=False)] * 3
    assert score("code_io", [plain, method, wrong], fields) == pytest.approx([1.0, 1.0, 0.0])


def test_an_endless_program_is_cut_by_the_limit_and_scores_what_it_passed():
    endless = "while True:\n    pass"
    (value,) = score("code_io", [endless], [row(STDIN_CASES)])
    assert value == 0.0 and not math.isnan(value)


def test_data_source_sends_verl_code_rows_here():
    right = "a, b = map(int, input().split())\nprint(a + b)"
    rows = [row(STDIN_CASES, source="codecontests"), row(STDIN_CASES, source="taco")]
    assert score("data_source", [right, "print(0)"], rows) == pytest.approx([1.0, 1 / 3])


def test_the_last_code_block_is_the_program_and_bad_ground_truths_are_named():
    assert solution_code("think\n```\nx = 1\n```\nthen\n```py\nx = 2\n```") == "x = 2"
    assert solution_code("print(1)") == "print(1)"
    assert io_cases(row(FN_CASES))[1] == "add"
    with pytest.raises(ValueError, match="not JSON"):
        io_cases({"reward_model": {"ground_truth": "{oops"}})
    with pytest.raises(ValueError, match="2 inputs and 1 outputs"):
        io_cases(row({"inputs": ["a", "b"], "outputs": ["c"]}))
    with pytest.raises(ValueError, match="needs each prompt row's reward_model.ground_truth"):
        io_cases({})
