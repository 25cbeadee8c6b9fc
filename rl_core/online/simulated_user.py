"""A scripted user of the served policy: asks arithmetic questions, accepts right answers.

Its verdict on a completion is the rule's (the final answer matches the gold one, as
``math_verify`` decides), flipped with probability ``noise``, as a real user's clicks are
not always right. Everything is drawn from one seeded generator, so the same seed asks the
same questions and flips the same verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.data import PromptSample
from rl_core.rewards.math_answers import answers_match, extract_final_answer, normalize_gold


def is_correct(completion: str, answer: str) -> bool:
    """Whether ``completion``'s final answer is ``answer``."""
    return answers_match(extract_final_answer(completion), normalize_gold(answer))


@dataclass(frozen=True)
class Question:
    """What the user asks next.

    Attributes:
        sample: The arithmetic problem (prompt and gold answer).
        seed: The sampling seed sent with the request.
        flip: Whether the verdict on the answer is flipped (noise).
    """

    sample: PromptSample
    seed: int
    flip: bool


class QuestionPlan:
    """The user's questions, one after another, from a seed.

    Args:
        samples: The problems to ask (drawn with replacement).
        noise: Probability that a verdict is flipped, in ``[0, 0.5)``.
        seed: Seed of the draws.

    Raises:
        ValueError: No samples, or a noise rate outside ``[0, 0.5)``.
    """

    def __init__(self, samples: Sequence[PromptSample], noise: float, seed: int) -> None:
        if not samples:
            raise ValueError("a simulated user needs at least one prompt to ask")
        if not 0.0 <= noise < 0.5:
            raise ValueError(f"noise must be in [0, 0.5), got {noise}")
        self.samples = list(samples)
        self.noise = noise
        self.rng = np.random.default_rng(seed)

    def next(self) -> Question:
        """The next question."""
        index = int(self.rng.integers(len(self.samples)))
        seed = int(self.rng.integers(1 << 31))
        flip = bool(self.rng.random() < self.noise)
        return Question(self.samples[index], seed, flip)

    @staticmethod
    def verdict(question: Question, completion: str) -> bool:
        """Whether the user accepts ``completion`` (the rule's verdict, maybe flipped)."""
        return is_correct(completion, question.sample.answer) != question.flip
