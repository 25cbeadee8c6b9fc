"""A tiny programming task: write the Python expression of a linear function from examples.

A prompt shows two values of ``f(x) = a*x + b`` (``a`` in 1..9, ``b`` in 0..49)::

    f(0)=3 f(1)=5 f=

and the model answers with an expression in ``x`` after ``####``, e.g. ``#### 2*x+3``. The
answer is not compared as text: the ``code_tests`` reward runs it in a sandbox against
hidden unit tests (``f(x)`` at six points, two of them never shown), so ``x*2+3`` or
``3+x+x`` pass too and ``2*x`` passes only ``f(0)`` when ``b`` is 0. Each sample's fields hold
``setup`` (how the answer becomes a function), ``tests`` (the asserts) and a supervised
``solution``. The held-out split is fixed by a hash of ``(a, b)``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from rl_core.data.prompts import PromptSample

#: Points the hidden tests check (0 and 1 are shown in the prompt).
TEST_POINTS = (0, 1, 2, 3, 7, 10)
_SHUFFLE_SEED = 0


def _held_out(a: int, b: int, fraction: float) -> bool:
    digest = hashlib.sha256(f"linear:{a}:{b}".encode()).digest()
    return int.from_bytes(digest, "big") % 10_000 < fraction * 10_000


@dataclass(frozen=True)
class LinearFunctionTask:
    """``f(x) = a*x + b`` from two examples, checked by unit tests.

    Attributes:
        max_slope: Largest ``a`` (from 1).
        max_intercept: Largest ``b`` (from 0).
        heldout_fraction: Fraction of the ``(a, b)`` pairs held out.
    """

    max_slope: int = 9
    max_intercept: int = 49
    heldout_fraction: float = 0.2

    def __post_init__(self) -> None:
        if self.max_slope < 1 or self.max_intercept < 0:
            raise ValueError("need max_slope >= 1 and max_intercept >= 0")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")

    def sample(self, a: int, b: int, source: str) -> PromptSample:
        """The prompt, tests and supervised solution of ``f(x) = a*x + b``."""
        expression = f"{a}*x+{b}"
        return PromptSample(
            prompt=f"f(0)={b} f(1)={a + b} f=",
            answer=expression,
            fields={
                "setup": "f = lambda x: ({code})",
                "tests": [f"assert f({x}) == {a * x + b}" for x in TEST_POINTS],
                "solution": f"#### {expression}",
            },
            source=source,
        )

    def _pairs(self, held: bool) -> list[tuple[int, int]]:
        pairs = [
            (a, b)
            for a in range(1, self.max_slope + 1)
            for b in range(self.max_intercept + 1)
            if _held_out(a, b, self.heldout_fraction) == held
        ]
        order = np.random.default_rng(_SHUFFLE_SEED + held).permutation(len(pairs))
        return [pairs[i] for i in order]

    def train_pool(self) -> list[PromptSample]:
        """Every pair not held out."""
        return [self.sample(a, b, "linear_functions:train") for a, b in self._pairs(False)]

    def heldout(self, n: int) -> list[PromptSample]:
        """The first ``n`` held-out pairs (fewer if there are fewer), always the same."""
        return [self.sample(a, b, "linear_functions:heldout") for a, b in self._pairs(True)[:n]]
