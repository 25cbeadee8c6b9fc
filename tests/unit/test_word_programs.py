"""The word_programs task: the careful teacher's solutions pass their hidden tests, the
sloppy teacher's fail exactly where a subtraction matters, the split is fixed, and the
source is registered for data.source."""

from __future__ import annotations

import pytest

from rl_core.data.prompts import PromptSample
from rl_core.data.sources import PROMPT_SOURCES
from rl_core.data.word_programs import WordProgramTask, evaluate, expression, sloppy_expression


def test_expressions_follow_the_steps_in_order() -> None:
    assert expression((("times", 3), ("add", 4))) == "x*3+4"
    assert expression((("add", 2), ("times", 3))) == "(x+2)*3"
    assert expression((("subtract", 5),)) == "x-5"
    assert evaluate((("add", 2), ("times", 3)), 1) == 9
    assert sloppy_expression((("subtract", 2), ("times", 3))) == "(x+2)*3"


def passes(sample: PromptSample) -> bool:
    """Whether the sample's supervised solution passes its hidden tests."""
    code = sample.fields["solution"].removeprefix("#### ")
    namespace: dict = {}
    exec(sample.fields["setup"].format(code=code), namespace)  # our own expression
    try:
        for test in sample.fields["tests"]:
            exec(test, namespace)
    except AssertionError:
        return False
    return True


def test_the_two_teachers_solutions_and_the_split() -> None:
    task = WordProgramTask()
    train, held = task.train_pool(), task.heldout()
    assert len(train) // 2 + len(held) == 22 + 22 * 22  # one or two of 22 steps
    assert not {s.prompt for s in train} & {s.prompt for s in held}
    assert all(passes(sample) for sample in held)
    careful, sloppy = train[0::2], train[1::2]
    assert [s.prompt for s in careful] == [s.prompt for s in sloppy]
    assert all(passes(sample) for sample in careful)
    for good, bad in zip(careful, sloppy, strict=True):
        # "subtract 3, add 3" written sloppily as x+3+3 still fails; only no subtraction passes
        assert passes(bad) == ("subtract" not in bad.prompt), bad.prompt
        assert bad.answer == good.answer  # the answer (and the reward) stay the careful one
    assert [s.prompt for s in WordProgramTask().heldout(5)] == [s.prompt for s in held[:5]]
    assert train[0].prompt.startswith("f: ") and train[0].prompt.endswith(" f=")


def test_task_settings_are_checked_and_the_source_is_registered() -> None:
    with pytest.raises(ValueError, match="max_steps must be 1 or 2"):
        WordProgramTask(max_steps=3)
    assert len(WordProgramTask(max_steps=1).train_pool()) < 2 * 22
    assert "word_programs" in PROMPT_SOURCES.names()
