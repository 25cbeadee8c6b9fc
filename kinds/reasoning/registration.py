"""The reasoning kind: language models trained on prompt sets with verifiable rewards.

Its config adds ``data`` to the shared sections and extends ``model``, ``rollout``,
``algorithm``, ``actor``, ``reward`` and ``eval``; its runs are named after the prompt set,
and registered versions keep the greedy accuracy they were registered with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import infra.llm  # noqa: F401  (registers the rollout engines and trainer backends)
import infra.sandbox  # noqa: F401  (registers the subprocess sandbox)
from kinds.reasoning.config import ReasoningConfig
from rl_core.data.sources import PROMPT_SOURCES
from rl_core.kind import Kind, register_kind

_CHUNK = 1 << 20


def task_name(cfg: ReasoningConfig) -> str:
    """``data.task_name``, else the prompt set named by its source (``arith-add-99``...)."""
    return cfg.data.task_name or PROMPT_SOURCES.get(cfg.data.source).task_name(cfg.data)


def protocol(cfg: ReasoningConfig) -> dict[str, Any]:
    """The held-out prompts, their template, the response budget and the reward."""
    data = cfg.data
    return {
        "data": [
            data.source,
            data.arithmetic_ops,
            data.arithmetic_max_operand,
            data.eval_files,
            data.eval_size,
            data.prompt_template,
            data.apply_chat_template,
            data.system_prompt,
            # a source's own settings (hf: the dataset and its held-out split) and the
            # over-long prompts left out of the held-out set
            data.options,
            data.max_prompt_length if data.filter_overlong_prompts else None,
        ],
        # the score is greedy (pass_k does not count), judged by the correct_when reward
        "eval": [cfg.rollout.max_new_tokens, cfg.eval.correct_when],
        "reward": cfg.reward.model_dump(mode="json", exclude={"num_tasks", "fanout_min_seconds"}),
    }


def data_fingerprint(cfg: ReasoningConfig, digest: Any) -> None:
    """The prompt files' bytes (streamed), or the prompt generator's settings."""
    if PROMPT_SOURCES.get(cfg.data.source).reads_files:
        for path in [*cfg.data.train_files, *cfg.data.eval_files]:
            digest.update(Path(path).name.encode())
            with open(Path(path).expanduser(), "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        return
    # the name (task_name) is not the data
    exclude = {"on_bad_row", "prompts_per_batch", "task_name"}
    data = cfg.data.model_dump(mode="json", exclude=exclude)
    digest.update(json.dumps(data, sort_keys=True).encode())


def runtime_of(cfg: ReasoningConfig) -> type:
    """The reasoning runtime class (imported now: it needs Ray and torch)."""
    from kinds.reasoning.runtime import ReasoningRuntime

    return ReasoningRuntime


REASONING = register_kind(
    Kind(
        name="reasoning",
        config=ReasoningConfig,
        runtime=runtime_of,
        score_metric="eval/accuracy",
        task_name=task_name,
        protocol=protocol,
        data_fingerprint=data_fingerprint,
    )
)
