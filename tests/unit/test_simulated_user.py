"""The scripted user's questions and verdicts: seeded, right answers accepted, noise flips."""

from __future__ import annotations

import pytest

from rl_core.data.arithmetic import ArithmeticTask
from rl_core.online.simulated_user import Question, QuestionPlan, is_correct


def test_the_plan_is_a_function_of_its_seed() -> None:
    samples = ArithmeticTask().heldout(50)

    def questions(seed: int) -> list[Question]:
        plan = QuestionPlan(samples, 0.1, seed)
        return [plan.next() for _ in range(20)]

    assert questions(3) == questions(3)
    assert questions(3) != questions(4)
    assert len({q.sample.prompt for q in questions(3)}) > 10


def test_right_answers_are_accepted_and_noise_flips_a_share() -> None:
    samples = ArithmeticTask().heldout(50)
    question = Question(samples[0], seed=0, flip=False)
    assert QuestionPlan.verdict(question, samples[0].answer) is True
    assert QuestionPlan.verdict(question, samples[0].answer + "1") is False
    flipped = Question(samples[0], seed=0, flip=True)
    assert QuestionPlan.verdict(flipped, samples[0].answer) is False
    plan = QuestionPlan(samples, 0.2, seed=0)
    flips = sum(plan.next().flip for _ in range(2000))
    assert 340 < flips < 460  # 20 % of 2000
    assert is_correct(" 19", "19") and not is_correct("18", "19")


@pytest.mark.parametrize(("samples", "noise"), [([], 0.0), (None, 0.5), (None, -0.1)])
def test_bad_plans_are_refused(samples, noise: float) -> None:
    with pytest.raises(ValueError, match="prompt|noise"):
        QuestionPlan(ArithmeticTask().heldout(5) if samples is None else samples, noise, 0)
