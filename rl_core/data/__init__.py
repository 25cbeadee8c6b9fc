"""Prompt datasets for RL on reasoning tasks.

* :func:`load_prompt_file` / :func:`load_prompts`: JSON Lines and Parquet prompt files
  (including GSM8K rows) as :class:`PromptSample` s, with per-row problem reports.
* :class:`ArithmeticTask`: a synthetic arithmetic task with a fixed held-out split;
  :func:`write_jsonl` writes samples as a prompt file.
* :class:`PromptSampler`: deterministic, resumable batches of sample indices.
"""

from rl_core.data.arithmetic import ALLOWED_OPS, ArithmeticTask, write_jsonl
from rl_core.data.prompts import (
    SUPPORTED_EXTENSIONS,
    DataFileError,
    PromptSample,
    RowProblem,
    load_prompt_file,
    load_prompts,
)
from rl_core.data.sampler import PromptSampler

__all__ = [
    "ALLOWED_OPS",
    "SUPPORTED_EXTENSIONS",
    "ArithmeticTask",
    "DataFileError",
    "PromptSample",
    "PromptSampler",
    "RowProblem",
    "load_prompt_file",
    "load_prompts",
    "write_jsonl",
]
