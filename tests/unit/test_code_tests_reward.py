"""The code_tests reward runs answers against unit tests in the real sandbox: the passed
fraction, limits that stop the model's code, and sandbox failures that are not scored."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.agents.outcomes import Outcome
from rl_core.agents.sandbox import SANDBOXES, SandboxRun
from rl_core.data.linear_functions import LinearFunctionTask
from rl_core.rewards.code_tests import CodeTestsReward, final_code, harness_program

CFG = SimpleNamespace(
    sandbox="subprocess", sandbox_retries=1, code_wall_seconds=3.0, code_workers=2
)


@pytest.fixture(scope="module")
def row() -> dict:
    (sample,) = [s for s in LinearFunctionTask().train_pool() if s.answer == "2*x+3"]
    return dict(sample.fields)


def test_answers_score_the_fraction_of_hidden_tests_they_pass(row):
    reward = CodeTestsReward(CFG)
    completions = [
        "#### 2*x+3",  # right
        "#### x+x+3",  # right, written otherwise
        "#### 2*x+4",  # passes nothing
        "#### 3",  # passes f(0) only
        "#### 2*x+",  # a syntax error: nothing passes, the program still ran
        "#### (lambda: [0 for _ in iter(int, 1)])() or 2*x+3",  # never ends: stopped
    ]
    scores = reward(completions=completions, fields=[row] * len(completions), scale=2.0)
    np.testing.assert_allclose(scores, [2.0, 2.0, 0.0, 2.0 / 6, 0.0, 0.0])


class BrokenSandbox:
    """A sandbox whose machinery fails every time (as a crashed container would)."""

    calls = 0

    def run(self, code, stdin="", limits=None):
        BrokenSandbox.calls += 1
        return SandboxRun(Outcome.INFRA_FAILURE, None, "", "", 0.0, 0.0, detail="gone")


def test_a_sandbox_that_keeps_failing_leaves_the_answer_unscored(row):
    SANDBOXES.register("broken", BrokenSandbox, force=True)
    try:
        reward = CodeTestsReward(SimpleNamespace(**{**vars(CFG), "sandbox": "broken"}))
        (score,) = reward(completions=["#### 2*x+3"], fields=[row])
    finally:
        SANDBOXES.unregister("broken")
    assert math.isnan(score)  # not a silent 0
    assert BrokenSandbox.calls == 2  # tried, then retried once


def test_code_extraction_and_bad_rows():
    assert final_code("think #### a #### 2*x") == "2*x"
    assert final_code("x+1") == "x+1"
    program, total = harness_program("x", {"setup": "f = lambda x: ({code})", "tests": ["1"]})
    assert total == 1 and "f = lambda x: (x)" in program
    with pytest.raises(ValueError, match="'tests' field"):
        harness_program("x", {"tests": []})
