"""Checks of ``actor.backend: megatron`` that run before any worker starts.

The layout (ranks = tensor × pipeline × data parallel), the model kind and, when the model
directory exists, whether the tensor-parallel size divides the model's heads and MLP width
(read from its ``config.json`` without importing ``transformers``).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _model_shape_problems(model_path: str, tp: int) -> list[str]:
    from rl_core.models.megatron.config import (
        HFShape,
        MegatronBridgeError,
        tensor_parallel_problems,
    )

    config = Path(model_path) / "config.json"
    if not config.is_file():
        return []  # created later (model.tiny_init, warm start); the trainer checks again
    try:
        hf = SimpleNamespace(**json.loads(config.read_text()))
        shape = HFShape.from_hf(hf)
    except (json.JSONDecodeError, TypeError, AttributeError) as exc:
        return [f"{config} is not a readable model config ({exc})"]
    except MegatronBridgeError as exc:
        return [f"model.model_path = {model_path!r}: {exc}"]
    return [
        f"actor.megatron.{problem} of model.model_path = {model_path!r}"
        for problem in tensor_parallel_problems(shape, tp)
    ]


def megatron_problems(cfg: Any) -> list[str]:
    """Why ``cfg`` cannot train with the megatron backend (empty when it can).

    Args:
        cfg: A validated :class:`~rl_core.config.RLPipeConfig` with ``actor.backend:
            megatron``.
    """
    if cfg.model.model_type.lower() != "hf_causal_lm":
        return [
            f"model.model_type = {cfg.model.model_type!r}: the megatron trainer trains "
            "'hf_causal_lm' policies only (allowed backend for this model: 'fsdp')"
        ]
    mega = cfg.actor.megatron
    tp, pp = mega.tensor_model_parallel_size, mega.pipeline_model_parallel_size
    problems = []
    if cfg.actor.num_workers % (tp * pp):
        problems.append(
            f"actor.num_workers = {cfg.actor.num_workers} is not a multiple of "
            f"actor.megatron.tensor_model_parallel_size * pipeline_model_parallel_size = "
            f"{tp * pp} (ranks = tensor x pipeline x data parallel)"
        )
    if cfg.model.value_head:
        problems.append(
            "model.value_head = true: the megatron trainer has no value head (use "
            "actor.backend: fsdp for PPO with a critic)"
        )
    if mega.sequence_parallel and tp == 1:
        problems.append(
            "actor.megatron.sequence_parallel = true needs tensor_model_parallel_size > 1"
        )
    if cfg.model.model_path and not cfg.run.warm_start:
        problems += _model_shape_problems(cfg.model.model_path, tp)
    return problems
