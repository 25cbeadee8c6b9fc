"""Prompt datasets for RL on reasoning tasks: JSON Lines and Parquet files of prompt/answer rows.

A row is an object with a non-empty string prompt and an answer (a string, or a number that
is converted to a string); its other columns are kept in :attr:`PromptSample.fields`.
GSM8K rows (``question`` and ``answer`` with a worked solution ending in ``#### 72``) are
recognised when the row has no prompt column: the question becomes the prompt, the text
after the last ``####`` the answer, and the full solution is kept in ``fields["solution"]``.

verl's prepared rows are read as they are: a prompt that is a list of chat messages
(``{"role": ..., "content": ...}``) is kept in :attr:`PromptSample.messages` (its last user
message is the ``prompt``), and a row without an answer column takes its answer from
``reward_model.ground_truth``; ``data_source``, ``extra_info`` and the other columns stay in
the fields.

Unusable rows are reported as :class:`RowProblem` s with their location (``path:line`` for
JSON Lines, ``path:row N`` for Parquet, both 1-based); ``on_bad_row`` chooses between
failing on the first file that has any and skipping them with a warning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

SUPPORTED_EXTENSIONS = (".json", ".jsonl", ".parquet")
_MAX_LISTED_PROBLEMS = 10
_MAX_WARNED_PROBLEMS = 3
_GSM8K_MARK = "####"
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")


@dataclass(frozen=True)
class PromptSample:
    """One prompt with its reference answer.

    Attributes:
        prompt: The text given to the model.
        answer: The reference answer the reward is computed against.
        fields: The row's other columns (JSON-able values), e.g. ``{"solution": ...}``.
        source: Where the sample came from, e.g. ``"train.jsonl:17"``.
        messages: The chat messages of a row whose prompt is a conversation (verl's
            format); empty for a text prompt.
    """

    prompt: str
    answer: str
    fields: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    messages: tuple[dict[str, str], ...] = ()


class DataFileError(ValueError):
    """A prompt file cannot be used; the message names the file and its problems."""


@dataclass
class RowProblem:
    """A row of a prompt file that could not be turned into a :class:`PromptSample`.

    Attributes:
        location: ``"path:line"`` for JSON Lines, ``"path:row N"`` for Parquet (1-based).
        reason: What is wrong with the row.
    """

    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


def load_prompt_file(
    path: str | os.PathLike[str],
    on_bad_row: Literal["skip", "error"] = "error",
    prompt_key: str = "prompt",
    answer_key: str = "answer",
) -> tuple[list[PromptSample], list[RowProblem]]:
    """Load the prompt samples of one JSON Lines (``.jsonl``/``.json``) or Parquet file.

    Args:
        path: The file; its extension selects the format.
        on_bad_row: ``"error"`` raises if any row is unusable, before returning anything;
            ``"skip"`` leaves such rows out, logs a warning and returns them as problems.
        prompt_key: Column holding the prompt.
        answer_key: Column holding the reference answer.

    Returns:
        The samples in file order and the problems of the skipped rows (empty with
        ``"error"``).

    Raises:
        DataFileError: The file is missing, has an unsupported extension, cannot be read,
            has no usable row, or (with ``on_bad_row="error"``) has a bad row.
        ValueError: ``on_bad_row`` is neither ``"skip"`` nor ``"error"``.
    """
    if on_bad_row not in ("skip", "error"):
        raise ValueError(f"on_bad_row must be 'skip' or 'error', got {on_bad_row!r}")
    name = os.fspath(path)
    file = Path(name).expanduser()
    suffix = file.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        raise DataFileError(
            f"{name}: unsupported file extension {file.suffix or '(none)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if not file.is_file():
        raise DataFileError(f"{name}: no such file")
    rows = _parquet_rows(file, name) if suffix == ".parquet" else _jsonl_rows(file, name)

    samples, problems = rows_to_samples(rows, prompt_key, answer_key)
    check_problems(name, len(samples), problems, on_bad_row)
    return samples, problems


def rows_to_samples(
    rows: Iterable[tuple[str, Any]], prompt_key: str = "prompt", answer_key: str = "answer"
) -> tuple[list[PromptSample], list[RowProblem]]:
    """Turn ``(location, row)`` pairs into samples and the problems of the unusable rows.

    Args:
        rows: Each row's location and the row (a dict), or a reason string for a row that
            could not even be read.
        prompt_key: Column holding the prompt (text, or chat messages).
        answer_key: Column holding the reference answer.
    """
    samples: list[PromptSample] = []
    problems: list[RowProblem] = []
    for location, row in rows:
        result = row if isinstance(row, str) else _to_sample(row, prompt_key, answer_key)
        if isinstance(result, str):
            problems.append(RowProblem(location, result))
        else:
            prompt, answer, fields, messages = result
            samples.append(PromptSample(prompt, answer, fields, location, messages))
    return samples, problems


def check_problems(
    name: str, kept: int, problems: list[RowProblem], on_bad_row: str, what: str = "row"
) -> None:
    """Refuse a file with bad rows (``on_bad_row="error"``) or none kept; else warn.

    Args:
        name: The file, as named in the messages.
        kept: Usable rows.
        problems: The unusable rows.
        on_bad_row: ``"error"`` or ``"skip"``.
        what: What a row is, in the messages (``row``, ``preference row``).

    Raises:
        DataFileError: Bad rows with ``"error"``, or no usable row; the message lists the
            first bad rows with their locations.
    """
    if problems and (on_bad_row == "error" or not kept):
        total = kept + len(problems)
        status = f"no usable {what}s" if not kept else f"bad {what}s"
        raise DataFileError(
            f"{name}: {status} ({len(problems)} of {total} {what}s unusable):\n"
            + _format_problems(problems)
        )
    if not kept:
        raise DataFileError(f"{name}: no {what}s")
    if problems:
        logger.warning(
            "%s: skipped %d bad %s(s) of %d: %s%s",
            name,
            len(problems),
            what,
            kept + len(problems),
            "; ".join(str(p) for p in problems[:_MAX_WARNED_PROBLEMS]),
            "; ..." if len(problems) > _MAX_WARNED_PROBLEMS else "",
        )


def load_prompts(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **kwargs: Any
) -> list[PromptSample]:
    """Load and concatenate the samples of several prompt files, in order.

    Args:
        paths: One file or a list of files.
        **kwargs: Passed to :func:`load_prompt_file` (``on_bad_row``, ``prompt_key``,
            ``answer_key``).

    Returns:
        The samples of all files, file after file.

    Raises:
        DataFileError: As :func:`load_prompt_file`, for the first failing file.
        ValueError: No file given.
    """
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not files:
        raise ValueError("load_prompts: no prompt files given")
    samples: list[PromptSample] = []
    for file in files:
        samples.extend(load_prompt_file(file, **kwargs)[0])
    return samples


def _format_problems(problems: list[RowProblem]) -> str:
    lines = [f"  {p}" for p in problems[:_MAX_LISTED_PROBLEMS]]
    if len(problems) > _MAX_LISTED_PROBLEMS:
        lines.append(f"  ... and {len(problems) - _MAX_LISTED_PROBLEMS} more")
    return "\n".join(lines)


def _jsonl_rows(file: Path, name: str) -> Iterator[tuple[str, Any]]:
    """Yield ``(location, row)`` per non-blank line; ``row`` is a reason string if unparsable."""
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            location = f"{name}:{number}"
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                yield location, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
                continue
            if number == 1:
                line = line.removeprefix("\ufeff")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield location, f"invalid JSON: {exc.msg} (column {exc.colno})"
                continue
            if not isinstance(row, dict):
                kind = "array" if isinstance(row, list) else type(row).__name__
                yield location, f"not a JSON object (got {kind}); expected one object per line"
                continue
            yield location, row


def _parquet_rows(file: Path, name: str) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"{name}: cannot read Parquet file: {exc}") from exc
    for number, row in enumerate(table.to_pylist(), start=1):
        yield f"{name}:row {number}", row


Row = tuple[str, str, dict[str, Any], tuple[dict[str, str], ...]]
_ROLES = ("system", "user", "assistant", "tool")


def _to_sample(row: dict[str, Any], prompt_key: str, answer_key: str) -> Row | str:
    """Return ``(prompt, answer, fields, messages)`` for a good row, else why it is bad."""
    if prompt_key not in row and "question" in row and "answer" in row:
        return _gsm8k_sample(row)
    if prompt_key not in row:
        return f"missing prompt column {prompt_key!r}"
    messages: tuple[dict[str, str], ...] = ()
    prompt = row[prompt_key]
    if isinstance(prompt, (list, tuple)):
        parsed = _chat_messages(prompt, prompt_key)
        if isinstance(parsed, str):
            return parsed
        messages = parsed
        users = [m["content"] for m in messages if m["role"] == "user"]
        prompt = users[-1] if users else messages[-1]["content"]
    if not isinstance(prompt, str):
        return f"prompt {prompt_key!r} must be a string or chat messages, got {_type_name(prompt)}"
    if not prompt.strip():
        return f"prompt {prompt_key!r} is empty"
    used = {prompt_key, answer_key}
    if answer_key in row:
        raw_answer = row[answer_key]
    elif isinstance(row.get("reward_model"), dict) and "ground_truth" in row["reward_model"]:
        raw_answer = row["reward_model"]["ground_truth"]  # verl's column
    else:
        return f"missing answer column {answer_key!r} (or verl's reward_model.ground_truth)"
    answer = _answer_text(raw_answer)
    if answer is None:
        return f"answer {answer_key!r} must be a string or a number, got {_type_name(raw_answer)}"
    if not answer.strip():
        return f"answer {answer_key!r} is empty"
    fields = {k: v for k, v in row.items() if k not in used}
    checked = _check_fields(prompt, answer, fields)
    return checked if isinstance(checked, str) else (*checked, messages)


def _chat_messages(value: Sequence[Any], key: str) -> tuple[dict[str, str], ...] | str:
    """Chat messages of a prompt column, or why they are unusable."""
    if not value:
        return f"prompt {key!r} has no chat messages"
    messages = []
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            return f"prompt {key!r} message {i} must be an object, got {_type_name(message)}"
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            return f"prompt {key!r} message {i} has role {role!r}; allowed: {', '.join(_ROLES)}"
        if not isinstance(content, str):
            return f"prompt {key!r} message {i} content must be a string, got {_type_name(content)}"
        messages.append({"role": role, "content": content})
    return tuple(messages)


def _gsm8k_sample(row: dict[str, Any]) -> Row | str:
    question, solution = row["question"], row["answer"]
    if not isinstance(question, str):
        return f"GSM8K question must be a string, got {_type_name(question)}"
    if not question.strip():
        return "GSM8K question is empty"
    if not isinstance(solution, str):
        return f"GSM8K answer must be a string, got {_type_name(solution)}"
    if _GSM8K_MARK not in solution:
        return "GSM8K answer has no '####' final answer"
    final = _DIGIT_COMMA.sub("", solution.rsplit(_GSM8K_MARK, 1)[1].strip())
    if not final:
        return "GSM8K answer is empty after '####'"
    fields = {k: v for k, v in row.items() if k not in ("question", "answer")}
    fields["solution"] = solution
    checked = _check_fields(question, final, fields)
    return checked if isinstance(checked, str) else (*checked, ())


def _answer_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    return None


def _check_fields(
    prompt: str, answer: str, fields: dict[str, Any]
) -> tuple[str, str, dict[str, Any]] | str:
    try:
        json.dumps(fields, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"extra columns are not JSON-able: {exc}"
    return prompt, answer, fields


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return f"non-finite number {value}"
    return type(value).__name__
