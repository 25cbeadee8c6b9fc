"""A tiny programming task the tiny model can learn: a function described in words, as code.

A prompt names one or two steps applied to ``x``::

    f: times 3, add 4 f=

and the model answers with a Python expression after ``####``, e.g. ``#### x*3+4``. Steps
are ``add N``, ``subtract N`` (N in 1..9) and ``times N`` (N in 2..5), applied in order, so
the expression parenthesises a sum or difference before a product (``add 2, times 3`` is
``(x+2)*3``). The answer is not compared as text: the ``code_tests`` reward runs it in a
sandbox against hidden unit tests (``f(x)`` at six points), so ``3*x+4`` passes too and a
step left out passes only where it makes no difference. Each sample's fields hold ``setup``
(how the answer becomes a function), ``tests`` (the asserts) and a supervised ``solution``.
The held-out split is fixed by a hash of the steps.

The supervised solutions come from two teachers: a careful one, and a sloppy one that
writes every ``subtract N`` as ``+N``. The training pool holds every function twice, once
with each teacher's solution (the same prompt, so a warm start learns the sign of a
subtraction as a coin flip); a function without a subtraction gets the same solution twice.
The hidden tests tell the signs apart, so reinforcement learning from them has one clear
thing to learn on top of the warm start.

Unlike :mod:`rl_core.data.linear_functions` (which asks for a slope, i.e. a subtraction the
tiny model rarely gets right), every token of the answer follows from a word of the prompt:
a translation a byte-level model of a few layers learns, and reinforcement learning from
the tests can finish.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

import numpy as np

from rl_core.data.prompts import PromptSample

#: Points the hidden tests check.
TEST_POINTS = (-3, 0, 1, 2, 5, 11)
#: Step word → (operator, operands).
STEPS = {"add": ("+", range(1, 10)), "subtract": ("-", range(1, 10)), "times": ("*", range(2, 6))}
_SHUFFLE_SEED = 0

Step = tuple[str, int]


def expression(steps: tuple[Step, ...]) -> str:
    """The Python expression of ``steps`` applied to ``x`` in order."""
    code = "x"
    for word, n in steps:
        op = STEPS[word][0]
        if op == "*" and ("+" in code or "-" in code):
            code = f"({code})"
        code = f"{code}{op}{n}"
    return code


def sloppy_expression(steps: tuple[Step, ...]) -> str:
    """What the sloppy teacher writes: :func:`expression` with each subtraction as ``+``."""
    return expression(tuple(("add" if word == "subtract" else word, n) for word, n in steps))


def evaluate(steps: tuple[Step, ...], x: int) -> int:
    """``steps`` applied to ``x`` (what the tests expect)."""
    for word, n in steps:
        x = {"+": x + n, "-": x - n, "*": x * n}[STEPS[word][0]]
    return x


def _held_out(steps: tuple[Step, ...], fraction: float) -> bool:
    key = ",".join(f"{w}{n}" for w, n in steps)
    digest = hashlib.sha256(f"words:{key}".encode()).digest()
    return int.from_bytes(digest, "big") % 10_000 < fraction * 10_000


@dataclass(frozen=True)
class WordProgramTask:
    """Functions of ``x`` described in words, written as Python expressions.

    Attributes:
        max_steps: Most steps per function (1 or 2).
        heldout_fraction: Fraction of the functions held out.
    """

    max_steps: int = 2
    heldout_fraction: float = 0.2

    def __post_init__(self) -> None:
        if self.max_steps not in (1, 2):
            raise ValueError(f"max_steps must be 1 or 2, got {self.max_steps}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")

    def sample(self, steps: tuple[Step, ...], source: str, sloppy: bool = False) -> PromptSample:
        """The prompt, tests and supervised solution of ``steps``.

        Args:
            steps: The function's steps.
            source: The sample's source tag.
            sloppy: Whether the supervised solution is the sloppy teacher's.
        """
        code = expression(steps)
        solution = sloppy_expression(steps) if sloppy else code
        words = ", ".join(f"{word} {n}" for word, n in steps)
        return PromptSample(
            prompt=f"f: {words} f=",
            answer=code,
            fields={
                "setup": "f = lambda x: ({code})",
                "tests": [f"assert f({x}) == {evaluate(steps, x)}" for x in TEST_POINTS],
                "solution": f"#### {solution}",
            },
            source=source,
        )

    def _functions(self, held: bool) -> list[tuple[Step, ...]]:
        single = [(word, n) for word, (_, ns) in STEPS.items() for n in ns]
        functions = [(s,) for s in single]
        if self.max_steps == 2:
            functions += list(itertools.product(single, single))
        chosen = [f for f in functions if _held_out(f, self.heldout_fraction) == held]
        order = np.random.default_rng(_SHUFFLE_SEED + held).permutation(len(chosen))
        return [chosen[i] for i in order]

    def train_pool(self) -> list[PromptSample]:
        """Every function not held out, twice: with the careful and the sloppy solution."""
        return [
            self.sample(f, "word_programs:train", sloppy=sloppy)
            for f in self._functions(False)
            for sloppy in (False, True)
        ]

    def heldout(self, n: int | None = None) -> list[PromptSample]:
        """The first ``n`` held-out functions (all when None), always the same."""
        functions = self._functions(True)
        return [self.sample(f, "word_programs:heldout") for f in functions[:n]]
