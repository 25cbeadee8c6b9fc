"""The prompt source ``hf``: a Hugging Face ``datasets`` dataset as prompts.

``data.options`` (:class:`HFOptions`) names the dataset the way ``datasets`` does:

* ``path``: a folder written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, a
  hub id (``openai/gsm8k``; needs the hub, or its files in the local cache), or a builder
  (``json``, ``parquet``, ``csv``) with ``data_files``;
* ``name``: the dataset's configuration (GSM8K's ``main``); ``revision``: a hub revision;
* ``split`` (training prompts, ``train``) and ``eval_split`` (held-out prompts; None: none),
  each a split name or a slice such as ``train[:90%]``.

Rows become samples exactly as rows of prompt files do (:mod:`rl_core.data.prompts`):
``data.prompt_key`` / ``data.answer_key`` name the columns, GSM8K rows and verl's columns are
recognised, chat-message prompts are kept as messages, and every other column is passed to
the reward in the sample's fields. Bad rows follow ``data.on_bad_row``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rl_core.data.prompts import DataFileError, PromptSample, check_problems, rows_to_samples

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install datasets (a dependency of rlpipe: bash scripts/setup_venv.sh)"


class HFOptions(BaseModel):
    """``data.options`` of the prompt source ``hf`` (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    name: str | None = None
    data_files: list[str] | None = None
    split: str = Field("train", min_length=1)
    eval_split: str | None = None
    revision: str | None = None


def load_hf_samples(data: Any) -> tuple[list[PromptSample], list[PromptSample]]:
    """Training and held-out samples of the dataset ``data.options`` names.

    Raises:
        DataFileError: The dataset or a split cannot be loaded, or has bad rows (with
            ``data.on_bad_row: error``) or none usable.
        ImportError: ``datasets`` is not installed.
    """
    options = HFOptions.model_validate(data.options)
    train = _split_samples(options, options.split, data)
    held = _split_samples(options, options.eval_split, data) if options.eval_split else []
    return train, held[: data.eval_size]


def hf_task_name(data: Any) -> str:
    """The task name of an ``hf`` source: the dataset's last path part (and configuration)."""
    options = HFOptions.model_validate(data.options)
    name = Path(options.path.rstrip("/")).name or "dataset"
    return f"{name}-{options.name}" if options.name else name


def _split_samples(options: HFOptions, split: str, data: Any) -> list[PromptSample]:
    dataset = _load_split(options, split)
    where = f"{options.path}[{split}]"
    samples, problems = rows_to_samples(_rows(dataset, where), data.prompt_key, data.answer_key)
    check_problems(where, len(samples), problems, data.on_bad_row)
    logger.info("%s: %d prompts (%d rows left out)", where, len(samples), len(problems))
    return samples


def _rows(dataset: Any, where: str) -> Iterator[tuple[str, Any]]:
    for number, row in enumerate(dataset, start=1):
        yield f"{where} row {number}", dict(row)


def _load_split(options: HFOptions, split: str) -> Any:
    try:
        datasets = importlib.import_module("datasets")
    except ImportError as exc:
        raise ImportError(f"data.source hf needs Hugging Face datasets: {INSTALL_HINT}") from exc
    folder = Path(options.path).expanduser()
    try:
        if folder.is_dir() and _saved_to_disk(folder):
            loaded = datasets.load_from_disk(str(folder))
            return _pick_split(loaded, split, options.path)
        return datasets.load_dataset(
            options.path,
            options.name,
            data_files=options.data_files,
            split=split,
            revision=options.revision,
        )
    except DataFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds; all are the same here
        raise DataFileError(
            f"data.options: cannot load split {split!r} of dataset {options.path!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _saved_to_disk(folder: Path) -> bool:
    """Whether ``folder`` holds a ``save_to_disk`` dataset (one split or a dict of them)."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _pick_split(loaded: Any, split: str, path: str) -> Any:
    """``split`` (a name, optionally sliced like ``train[:90%]``) of a loaded dataset."""
    name, _, rest = split.partition("[")
    if hasattr(loaded, "keys"):  # a DatasetDict
        if name not in loaded:
            raise DataFileError(
                f"data.options.split: dataset {path!r} has no split {name!r}; "
                f"it has: {', '.join(loaded.keys())}"
            )
        dataset = loaded[name]
    else:
        dataset = loaded
    if not rest:
        return dataset
    return dataset.select(_slice_rows(rest.rstrip("]"), len(dataset), split))


def _slice_rows(spec: str, size: int, split: str) -> range:
    """Row indices of a ``datasets`` slice such as ``:90%``, ``10:`` or ``:100``."""
    start, _, stop = spec.partition(":")

    def bound(text: str, default: int) -> int:
        text = text.strip()
        if not text:
            return default
        try:
            if text.endswith("%"):
                return round(size * float(text[:-1]) / 100)
            return int(text)
        except ValueError:
            raise DataFileError(f"data.options: cannot read the slice of split {split!r}") from None

    return range(*slice(bound(start, 0), bound(stop, size)).indices(size))
