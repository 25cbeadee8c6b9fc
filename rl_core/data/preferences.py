"""Preference pairs for reward-model training: files of rows, or synthetic arithmetic pairs.

A row is an object with three non-empty strings: ``prompt``, ``chosen`` (the preferred
response) and ``rejected`` (the other one), which must differ; other columns are ignored.
Files are JSON Lines (``.jsonl``, or ``.json`` with one object per line) or a ``.json``
array of objects. Unusable rows are reported with their file, row number, field and what
the field allows (:class:`~rl_core.data.RowProblem`); ``on_bad_row`` chooses between
failing and skipping them with a warning, as for prompt files.

The synthetic source (:func:`arithmetic_pairs`) builds one pair per problem of
:class:`~rl_core.data.ArithmeticTask`: ``chosen`` is the correct answer and ``rejected`` a
wrong one (the answer plus a random non-zero delta), or, for a share of the pairs, the
correct answer said at length (so the model also learns to prefer the shorter of two
correct answers). Its held-out pairs are those of the task's held-out problems.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rl_core.data.arithmetic import ArithmeticTask
from rl_core.data.prompts import (
    DataFileError,
    PromptSample,
    RowProblem,
    _jsonl_rows,
    _type_name,
    check_problems,
)

#: The fields of a preference row, in the order they are checked.
PAIR_FIELDS = ("prompt", "chosen", "rejected")
#: File extensions of preference files.
PREFERENCE_EXTENSIONS = (".jsonl", ".json")
#: Seeds of the synthetic pairs (fixed: the pairs depend on the data settings only).
TRAIN_PAIRS_SEED = 1
HELDOUT_PAIRS_SEED = 2
_HASH_BUCKETS = 10_000


@dataclass(frozen=True)
class PreferencePair:
    """One prompt with a preferred and a dispreferred response.

    Attributes:
        prompt: The prompt text.
        chosen: The preferred response.
        rejected: The dispreferred response.
        source: Where the pair came from, e.g. ``"prefs.jsonl:17"``.
    """

    prompt: str
    chosen: str
    rejected: str
    source: str = ""


def check_pair_row(row: dict[str, Any]) -> PreferencePair | str:
    """The pair of a row, or the reason it is unusable (naming the field and what it allows)."""
    allowed = "a non-empty string"
    for name in PAIR_FIELDS:
        if name not in row:
            present = ", ".join(repr(k) for k in row) or "none"
            return (
                f"missing field {name!r}: a preference row needs 'prompt', 'chosen' and "
                f"'rejected', each {allowed} (fields present: {present})"
            )
        value = row[name]
        if not isinstance(value, str):
            return f"field {name!r} must be {allowed}, got {_type_name(value)}"
        if not value.strip():
            return f"field {name!r} is empty; allowed: {allowed}"
    if row["chosen"] == row["rejected"]:
        return (
            "fields 'chosen' and 'rejected' are the same text; a pair needs two different responses"
        )
    return PreferencePair(row["prompt"], row["chosen"], row["rejected"])


def load_preference_file(
    path: str | os.PathLike[str], on_bad_row: Literal["skip", "error"] = "error"
) -> tuple[list[PreferencePair], list[RowProblem]]:
    """Load the preference pairs of one file.

    Args:
        path: A ``.jsonl`` file, or a ``.json`` file (an array of objects, or one object
            per line).
        on_bad_row: ``"error"`` raises if any row is unusable; ``"skip"`` leaves such rows
            out, logs a warning and returns them as problems.

    Returns:
        The pairs in file order and the problems of the skipped rows.

    Raises:
        DataFileError: The file is missing, has another extension, cannot be read, has no
            usable row, or (with ``on_bad_row="error"``) has a bad row; the message names
            the file, each bad row's number and what is wrong with it.
    """
    name = os.fspath(path)
    file = Path(name)
    if file.suffix.lower() not in PREFERENCE_EXTENSIONS:
        raise DataFileError(
            f"{name}: unsupported file extension {file.suffix or '(none)'!r} for preference "
            f"pairs; supported: {', '.join(PREFERENCE_EXTENSIONS)}"
        )
    if not file.is_file():
        raise DataFileError(f"{name}: no such file")
    pairs: list[PreferencePair] = []
    problems: list[RowProblem] = []
    for location, row in _rows(file, name):
        result = row if isinstance(row, str) else check_pair_row(row)
        if isinstance(result, str):
            problems.append(RowProblem(location, result))
        else:
            pairs.append(PreferencePair(result.prompt, result.chosen, result.rejected, location))
    check_problems(name, len(pairs), problems, on_bad_row, "preference row")
    return pairs, problems


def _rows(file: Path, name: str) -> Iterator[tuple[str, Any]]:
    """``(location, row)`` of each row; a JSON array's rows are numbered from 1."""
    if file.suffix.lower() == ".json":
        with file.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
        if head.startswith("["):
            try:
                rows = json.loads(file.read_text(encoding="utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise DataFileError(f"{name}: not a valid JSON array: {exc}") from None
            for number, row in enumerate(rows, start=1):
                location = f"{name}:row {number}"
                if isinstance(row, dict):
                    yield location, row
                else:
                    yield location, f"not a JSON object (got {_type_name(row)})"
            return
    yield from _jsonl_rows(file, name)


def is_heldout_pair(pair: PreferencePair, fraction: float) -> bool:
    """Whether a pair of a file without a held-out file is held out (a hash of its texts)."""
    text = json.dumps([pair.prompt, pair.chosen, pair.rejected])
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest, "big") % _HASH_BUCKETS < fraction * _HASH_BUCKETS


def verbose_answer(sample: PromptSample) -> str:
    """The correct answer said at length: ``"19, since 12+7=19"``."""
    return f"{sample.answer}, since {sample.prompt}{sample.answer}"


def digit_error(answer: str, position: int, replacement: int) -> str:
    """``answer`` with one digit written wrong, the kind of mistake a model makes.

    Args:
        answer: An integer answer (``"-42"``, ``"7"``).
        position: Which digit, counted from the left, modulo the number of digits.
        replacement: Picks the wrong digit, modulo the digits allowed there (never the
            original one, never a leading zero of a longer number).

    Returns:
        A different integer, as text.
    """
    sign, digits = ("-", answer[1:]) if answer.startswith("-") else ("", answer)
    index = position % len(digits)
    allowed = [
        d
        for d in "0123456789"
        if d != digits[index] and not (d == "0" and index == 0 and len(digits) > 1)
    ]
    wrong = allowed[replacement % len(allowed)]
    return sign + digits[:index] + wrong + digits[index + 1 :]


def arithmetic_pairs(
    samples: list[PromptSample],
    max_delta: int,
    shorter_fraction: float,
    seed: int,
    digit_error_fraction: float = 0.0,
) -> list[PreferencePair]:
    """One preference pair per arithmetic problem.

    Args:
        samples: Problems of :class:`~rl_core.data.ArithmeticTask` (their ``answer``).
        max_delta: A wrong answer is the answer plus a delta in ``[-max_delta, max_delta]``,
            never 0.
        shorter_fraction: Share of the pairs whose rejected response is the correct answer
            said at length (:func:`verbose_answer`) instead of a wrong one.
        seed: Seed of the deltas and of which pairs are "shorter correct" ones.
        digit_error_fraction: Share of the wrong answers that have one digit written wrong
            (:func:`digit_error`: a wrong tens digit is off by 10 to 90) instead of a delta.

    Returns:
        The pairs, in the samples' order.
    """
    rng = np.random.default_rng(seed)
    n = len(samples)
    deltas = rng.integers(1, max_delta + 1, size=n) * rng.choice([-1, 1], n)
    verbose = rng.random(n) < shorter_fraction
    digit = (rng.random(n) < digit_error_fraction).tolist()
    positions = rng.integers(0, 1 << 30, size=n).tolist()
    replacements = rng.integers(0, 1 << 30, size=n).tolist()
    pairs = []
    for i, (sample, delta, longer) in enumerate(
        zip(samples, deltas.tolist(), verbose.tolist(), strict=True)
    ):
        if longer:
            rejected = verbose_answer(sample)
        elif digit[i]:
            rejected = digit_error(sample.answer, positions[i], replacements[i])
        else:
            rejected = str(int(sample.answer) + delta)
        pairs.append(PreferencePair(sample.prompt, sample.answer, rejected, sample.source))
    return pairs


def load_preference_pairs(data: Any) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """Training and held-out pairs of the ``data`` section of a reward-model run.

    ``data.source`` ``arithmetic``: :func:`arithmetic_pairs` of the task's training and
    held-out problems; ``files``: the rows of ``data.train_files`` and ``data.eval_files``,
    or, without eval files, the ``data.heldout_fraction`` of the training rows picked by
    :func:`is_heldout_pair`. At most ``data.eval_size`` pairs are held out.

    Raises:
        DataFileError: A file is missing, unreadable or has bad rows (``data.on_bad_row``).
    """
    if data.source == "arithmetic":
        task = ArithmeticTask(
            max_operand=data.arithmetic_max_operand, ops=tuple(data.arithmetic_ops)
        )
        held = task.heldout(min(data.eval_size, len(task.heldout())))
        return (
            arithmetic_pairs(
                task.train_pool(),
                data.max_delta,
                data.shorter_fraction,
                TRAIN_PAIRS_SEED,
                data.digit_error_fraction,
            ),
            arithmetic_pairs(
                held,
                data.max_delta,
                data.shorter_fraction,
                HELDOUT_PAIRS_SEED,
                data.digit_error_fraction,
            ),
        )
    rows = [p for path in data.train_files for p in load_preference_file(path, data.on_bad_row)[0]]
    if data.eval_files:
        held = [
            p for path in data.eval_files for p in load_preference_file(path, data.on_bad_row)[0]
        ]
        train = rows
    else:
        held = [p for p in rows if is_heldout_pair(p, data.heldout_fraction)]
        train = [p for p in rows if not is_heldout_pair(p, data.heldout_fraction)]
    if not train or not held:
        raise DataFileError(
            f"{', '.join(data.train_files)}: {len(train)} training and {len(held)} held-out "
            "pairs; both must be non-empty (add data.eval_files or raise data.heldout_fraction)"
        )
    return train, held[: data.eval_size]
