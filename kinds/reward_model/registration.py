"""The reward_model kind: scalar-head reward models trained on preference pairs.

Its config replaces ``model``, ``algorithm``, ``actor`` and ``eval`` with its own sections
and adds ``data`` (preference pairs); its runs are named after the pair set, scored by
their held-out pairwise accuracy, and registered like policies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import infra.llm  # noqa: F401  (registers the trainer backends)
from kinds.reward_model.config import RewardModelConfig
from rl_core.kind import Kind, register_kind

_CHUNK = 1 << 20
_OP_NAMES = {"+": "add", "-": "sub", "*": "mul"}


def task_name(cfg: RewardModelConfig) -> str:
    """The pair set: ``prefs-arith-<ops>-<max operand>``, or ``prefs-<first file's stem>``."""
    data = cfg.data
    if data.source == "arithmetic":
        ops = "-".join(_OP_NAMES[op] for op in data.arithmetic_ops)
        return f"prefs-arith-{ops}-{data.arithmetic_max_operand}"
    return f"prefs-{Path(data.train_files[0]).stem}"


def protocol(cfg: RewardModelConfig) -> dict[str, Any]:
    """The held-out pairs and how texts are cut (what the pairwise accuracy is measured on)."""
    data = cfg.data
    held = (
        [
            data.arithmetic_ops,
            data.arithmetic_max_operand,
            data.max_delta,
            data.shorter_fraction,
            data.digit_error_fraction,
        ]
        if data.source == "arithmetic"
        else [data.eval_files or data.train_files, data.heldout_fraction, data.on_bad_row]
    )
    return {"data": [data.source, *held, data.eval_size, data.max_length]}


def data_fingerprint(cfg: RewardModelConfig, digest: Any) -> None:
    """The pair files' bytes (streamed), or the synthetic pairs' settings."""
    data = cfg.data
    if data.source == "files":
        for path in [*data.train_files, *data.eval_files]:
            digest.update(Path(path).name.encode())
            with open(path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        return
    settings = data.model_dump(mode="json", exclude={"on_bad_row", "pairs_per_batch"})
    digest.update(json.dumps(settings, sort_keys=True).encode())


def runtime_of(cfg: RewardModelConfig) -> type:
    """The reward-model runtime class (imported now: it needs Ray and torch)."""
    from kinds.reward_model.runtime import RewardModelRuntime

    return RewardModelRuntime


REWARD_MODEL = register_kind(
    Kind(
        name="reward_model",
        config=RewardModelConfig,
        runtime=runtime_of,
        score_metric="eval/pairwise_accuracy",
        task_name=task_name,
        protocol=protocol,
        data_fingerprint=data_fingerprint,
    )
)
