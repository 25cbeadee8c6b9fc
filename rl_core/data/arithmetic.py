"""A synthetic arithmetic task (``"12+7="`` -> ``"19"``) with a fixed held-out split.

The problem universe is every ``(a, op, b)`` with ``0 <= a, b <= max_operand``. A problem is
held out iff ``sha256(f"{a}{op}{b}") mod 10_000 < heldout_fraction * 10_000``: the split
depends on nothing else (not on seeds, processes, Python's hash randomisation, nor on
``max_operand``: a problem held out with ``max_operand=99`` is held out with any larger
``max_operand`` too).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from rl_core.data.prompts import PromptSample

ALLOWED_OPS = ("+", "-", "*")
_HASH_BUCKETS = 10_000
_HELDOUT_SHUFFLE_SEED = 0


def _is_heldout(a: int, op: str, b: int, heldout_fraction: float) -> bool:
    digest = hashlib.sha256(f"{a}{op}{b}".encode()).digest()
    return int.from_bytes(digest, "big") % _HASH_BUCKETS < heldout_fraction * _HASH_BUCKETS


def _apply(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b


@dataclass(frozen=True)
class ArithmeticTask:
    """Two-operand arithmetic prompts with a held-out split that never changes.

    The universe has ``(max_operand + 1) ** 2 * len(ops)`` problems; it is enumerated (and
    hashed) once per instance, on first use.

    Attributes:
        max_operand: Largest operand; operands are ``0..max_operand``.
        ops: Operators, a non-empty subset of ``("+", "-", "*")``.
        heldout_fraction: Target fraction of the universe held out, in ``(0, 1)``.
        prompt_format: Prompt template with the placeholders ``{a}``, ``{op}`` and ``{b}``.
    """

    max_operand: int = 99
    ops: tuple[str, ...] = ("+",)
    heldout_fraction: float = 0.1
    prompt_format: str = "{a}{op}{b}="

    def __post_init__(self) -> None:
        if isinstance(self.max_operand, bool) or not isinstance(self.max_operand, int):
            raise ValueError(f"max_operand must be an integer >= 1, got {self.max_operand!r}")
        if self.max_operand < 1:
            raise ValueError(f"max_operand must be >= 1, got {self.max_operand}")
        if isinstance(self.ops, str) or not isinstance(self.ops, Iterable):
            raise ValueError(f"ops must be a tuple of operators from {ALLOWED_OPS}")
        object.__setattr__(self, "ops", tuple(self.ops))
        if not self.ops:
            raise ValueError(f"ops must not be empty; allowed: {ALLOWED_OPS}")
        unknown = [op for op in self.ops if op not in ALLOWED_OPS]
        if unknown:
            raise ValueError(f"ops has unknown operators {unknown}; allowed: {ALLOWED_OPS}")
        if len(set(self.ops)) != len(self.ops):
            raise ValueError(f"ops has duplicates: {self.ops}; allowed: {ALLOWED_OPS}")
        fraction = self.heldout_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise ValueError(f"heldout_fraction must be a number in (0, 1), got {fraction!r}")
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1) exclusive, got {fraction}")
        try:
            self.prompt_format.format(a=1, op=self.ops[0], b=2)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"prompt_format {self.prompt_format!r} is not a valid template "
                f"(placeholders allowed: {{a}}, {{op}}, {{b}}): {exc!r}"
            ) from exc

    @cached_property
    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        """Held-out and train problems as ``(op index, a, b)`` rows, in their final order."""
        ops = sorted(self.ops)
        heldout: list[tuple[int, int, int]] = []
        train: list[tuple[int, int, int]] = []
        for op_index, op in enumerate(ops):
            for a in range(self.max_operand + 1):
                for b in range(self.max_operand + 1):
                    side = heldout if _is_heldout(a, op, b, self.heldout_fraction) else train
                    side.append((op_index, a, b))
        heldout_keys = np.asarray(heldout, dtype=np.int64).reshape(-1, 3)
        order = np.random.default_rng(_HELDOUT_SHUFFLE_SEED).permutation(len(heldout_keys))
        return heldout_keys[order], np.asarray(train, dtype=np.int64).reshape(-1, 3)

    def heldout(self, n: int | None = None) -> list[PromptSample]:
        """The held-out problems in a fixed order: sorted by ``(op, a, b)``, then shuffled.

        Args:
            n: Number of problems (the first ``n`` of the fixed order); ``None`` for all.

        Returns:
            The held-out samples, ``source="arithmetic:heldout"``.

        Raises:
            ValueError: ``n`` is negative or larger than the held-out set.
        """
        keys = self._split[0]
        if n is not None:
            if n < 0 or n > len(keys):
                raise ValueError(f"heldout: n must be in [0, {len(keys)}], got {n}")
            keys = keys[:n]
        return self._samples(keys, "arithmetic:heldout")

    def train_pool(self) -> list[PromptSample]:
        """All problems that are not held out, sorted by ``(op, a, b)``.

        Returns:
            The train samples, ``source="arithmetic:train"``.
        """
        return self._samples(self._split[1], "arithmetic:train")

    def sample_train(self, n: int, seed: int) -> list[PromptSample]:
        """Draw ``n`` train problems uniformly with replacement.

        Args:
            n: Number of samples (>= 0).
            seed: Seed of the ``numpy.random.Generator`` that draws them.

        Returns:
            The drawn samples; the same ``(n, seed)`` always gives the same list.

        Raises:
            ValueError: ``n`` is negative or the train pool is empty.
        """
        if n < 0:
            raise ValueError(f"sample_train: n must be >= 0, got {n}")
        keys = self._split[1]
        if len(keys) == 0:
            raise ValueError("sample_train: the train pool is empty")
        picks = np.random.default_rng(seed).integers(0, len(keys), size=n)
        return self._samples(keys[picks], "arithmetic:train")

    def _samples(self, keys: np.ndarray, source: str) -> list[PromptSample]:
        ops = sorted(self.ops)
        samples = []
        for op_index, a, b in keys.tolist():
            op = ops[op_index]
            samples.append(
                PromptSample(
                    prompt=self.prompt_format.format(a=a, op=op, b=b),
                    answer=str(_apply(a, op, b)),
                    fields={"a": a, "op": op, "b": b},
                    source=source,
                )
            )
        return samples


def write_jsonl(samples: Iterable[PromptSample], path: str | os.PathLike[str]) -> Path:
    """Write samples as JSON Lines, one ``{"prompt", "answer", **fields}`` object per line.

    The file loads back with :func:`rl_core.data.load_prompt_file`. Fields named ``prompt``
    or ``answer`` are dropped (the sample's own prompt and answer win). Parent directories
    are created.

    Args:
        samples: The samples to write.
        path: Destination file (``.jsonl`` by convention).

    Returns:
        The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as handle:
        for sample in samples:
            extra = {k: v for k, v in sample.fields.items() if k not in ("prompt", "answer")}
            row = {"prompt": sample.prompt, "answer": sample.answer, **extra}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return target
