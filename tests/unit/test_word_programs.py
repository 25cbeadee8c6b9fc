"""The word_programs task: every function's supervised solution passes its own hidden tests,
the split is fixed, and the source is registered for data.source."""

from __future__ import annotations

import pytest

from rl_core.data.sources import PROMPT_SOURCES
from rl_core.data.word_programs import WordProgramTask, evaluate, expression


def test_expressions_follow_the_steps_in_order() -> None:
    assert expression((("times", 3), ("add", 4))) == "x*3+4"
    assert expression((("add", 2), ("times", 3))) == "(x+2)*3"
    assert expression((("subtract", 5),)) == "x-5"
    assert evaluate((("add", 2), ("times", 3)), 1) == 9


def test_every_solution_passes_its_tests_and_the_split_is_fixed() -> None:
    task = WordProgramTask()
    train, held = task.train_pool(), task.heldout()
    assert len(train) + len(held) == 22 + 22 * 22  # one or two of 22 steps
    assert not {s.prompt for s in train} & {s.prompt for s in held}
    for sample in train + held:
        code = sample.fields["solution"].removeprefix("#### ")
        namespace: dict = {}
        exec(sample.fields["setup"].format(code=code), namespace)  # our own expression
        for test in sample.fields["tests"]:
            exec(test, namespace)
    assert [s.prompt for s in WordProgramTask().heldout(5)] == [s.prompt for s in held[:5]]
    assert train[0].prompt.startswith("f: ") and train[0].prompt.endswith(" f=")


def test_task_settings_are_checked_and_the_source_is_registered() -> None:
    with pytest.raises(ValueError, match="max_steps must be 1 or 2"):
        WordProgramTask(max_steps=3)
    assert len(WordProgramTask(max_steps=1).train_pool()) < 22
    assert "word_programs" in PROMPT_SOURCES.names()
