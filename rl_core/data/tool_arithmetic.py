"""A task where a tool helps on some prompts and not on others, with synthetic tool traces.

Prompts are multiplications ``"a*b="`` with ``a >= 100`` (a tiny model cannot do them in its
head; with the ``calculator`` tool it only has to copy the result) and small additions
``"a+b="`` with one-digit operands (easy without the tool). Every sample carries a
supervised trace (fields ``trace`` and ``solution``) for a warm start: a fraction
``tool_trace_rate`` of them, chosen by a hash of the problem (and of the repeat, for the
additions the pool repeats) and **not** by its kind, call the calculator first; the others
answer at once. A model warm-started on them calls the tool
about that often on every kind of prompt: reinforcement learning with a per-call cost then
has to learn *when* the tool pays off.

A trace is a list of ``[text, role]`` segments, role ``"model"`` (trained on) or ``"tool"``
(the tool's output: attended to, never trained on), in the ``xml`` tool-call syntax::

    123*45=  →  <call>calculator: 123*45</call> | <result>5535</result> | #### 5535

The multiplications' held-out split is fixed by a hash of each problem (as in
:mod:`rl_core.data.arithmetic`). The one-digit additions are few (100): training sees all of
them and evaluation asks all of them, since what the task measures on them is whether the
model calls the tool, not whether it can add.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rl_core.data.prompts import PromptSample

_BUCKETS = 10_000
_SHUFFLE_SEED = 0


def _bucket(text: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``text`` (and the purpose ``salt``)."""
    digest = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return (int.from_bytes(digest, "big") % _BUCKETS) / _BUCKETS


@dataclass(frozen=True)
class ToolArithmeticTask:
    """Multiplications that need the calculator and additions that do not.

    Attributes:
        mul_min: Smallest first factor (``a``) of a multiplication.
        mul_max: Largest first factor.
        mul_factor_max: Largest second factor (``b``, from 2).
        add_max: Largest operand of an addition (from 0).
        add_fraction: Fraction of the train and held-out prompts that are additions.
        tool_trace_rate: Fraction of the supervised traces that call the calculator.
        heldout_fraction: Fraction of the multiplications held out.
    """

    mul_min: int = 100
    mul_max: int = 999
    mul_factor_max: int = 99
    add_max: int = 9
    add_fraction: float = 0.5
    tool_trace_rate: float = 0.5
    heldout_fraction: float = 0.2

    def __post_init__(self) -> None:
        if not 1 <= self.mul_min <= self.mul_max:
            raise ValueError(f"need 1 <= mul_min <= mul_max, got {self.mul_min}, {self.mul_max}")
        if self.mul_factor_max < 2 or self.add_max < 1:
            raise ValueError("mul_factor_max must be >= 2 and add_max >= 1")
        for name in ("add_fraction", "tool_trace_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")

    @cached_property
    def _problems(self) -> dict[str, tuple[list[tuple[int, str, int]], ...]]:
        """Each kind's ``(train, held out)`` problems, each list in a fixed shuffled order."""
        kinds = {
            "mul": [
                (a, "*", b)
                for a in range(self.mul_min, self.mul_max + 1)
                for b in range(2, self.mul_factor_max + 1)
            ],
            "add": [(a, "+", b) for a in range(self.add_max + 1) for b in range(self.add_max + 1)],
        }
        rng = np.random.default_rng(_SHUFFLE_SEED)
        out = {}
        for kind, problems in kinds.items():
            if kind == "add":  # few enough to train on all; evaluation asks all of them too
                held, train = list(problems), list(problems)
            else:
                held = [
                    p
                    for p in problems
                    if _bucket(f"{p[0]}{p[1]}{p[2]}", "heldout") < self.heldout_fraction
                ]
                held_set = set(held)
                train = [p for p in problems if p not in held_set]
            out[kind] = tuple(
                [part[i] for i in rng.permutation(len(part))] for part in (train, held)
            )
        return out

    def sample(self, problem: tuple[int, str, int], source: str, copy: int = 0) -> PromptSample:
        """The prompt, answer, kind and supervised trace of one problem.

        ``copy`` numbers the repeats of a problem in the train pool: each repeat draws its
        own trace, so a problem seen many times (an addition) is answered both ways, and the
        warm-started model keeps a choice on it that reinforcement learning can move.
        """
        a, op, b = problem
        answer = str(a * b if op == "*" else a + b)
        expression = f"{a}{op}{b}"
        if _bucket(f"{expression}#{copy}", "trace") < self.tool_trace_rate:
            trace = [
                [f"<call>calculator: {expression}</call>", "model"],
                [f"<result>{answer}</result>", "tool"],
                [f"#### {answer}", "model"],
            ]
        else:
            trace = [[f"#### {answer}", "model"]]
        return PromptSample(
            prompt=f"{expression}=",
            answer=answer,
            fields={
                "kind": "mul" if op == "*" else "add",
                "trace": trace,
                "solution": "".join(text for text, _ in trace),
            },
            source=source,
        )

    def _mix(self, split: int, n: int | None, source: str) -> list[PromptSample]:
        """Additions and multiplications interleaved at ``add_fraction`` (``n`` at most)."""
        adds, muls = self._problems["add"][split], self._problems["mul"][split]
        total = len(adds) + len(muls) if n is None else n
        want_adds = min(len(adds), round(total * self.add_fraction))
        picks = adds[:want_adds] + muls[: total - want_adds]
        order = np.random.default_rng(_SHUFFLE_SEED + 1 + split).permutation(len(picks))
        return [self.sample(picks[i], source) for i in order]

    def train_pool(self, size: int = 20_000) -> list[PromptSample]:
        """``size`` train problems (additions repeat: there are few of them)."""
        adds, muls = self._problems["add"][0], self._problems["mul"][0]
        want_adds = round(size * self.add_fraction)
        picks = [(adds[i % len(adds)], i // len(adds)) for i in range(want_adds)]
        picks += [(problem, 0) for problem in muls[: size - want_adds]]
        order = np.random.default_rng(_SHUFFLE_SEED + 3).permutation(len(picks))
        return [self.sample(*picks[i][:1], "tool_arithmetic:train", picks[i][1]) for i in order]

    def heldout(self, n: int) -> list[PromptSample]:
        """``n`` held-out problems (fewer if the split is smaller), always the same ones."""
        return self._mix(1, n, "tool_arithmetic:heldout")
