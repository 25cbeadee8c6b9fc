"""A tiny ``online_arith``: the one-layer test LM behind the endpoint, small batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rl_core.models.tiny_lm import create_tiny_lm


def tiny_online_preset(
    root: Path, run: str, batch: int, iterations: int, online: dict[str, Any] | None = None
) -> Path:
    """Write the preset under ``root``; ``online`` updates its ``online`` section.

    Returns:
        The YAML file's path.
    """
    model = create_tiny_lm(root / "tiny", num_hidden_layers=1)
    config = {
        "run": {
            "name": run,
            "max_iterations": iterations,
            "eval_interval": 2,
            "checkpoint_interval": 2,
        },
        "model": {"model_type": "hf_causal_lm", "model_path": str(model)},
        "data": {"prompts_per_batch": batch, "eval_size": 8},
        "rollout": {"max_new_tokens": 4},
        "algorithm": {"adv_type": "outcome", "group_size": 1, "normalize_advantages": False},
        "reward": {"reward_type": "math_verify"},
        "actor": {"micro_batch_size": batch, "lr": 1.0e-2},
        "eval": {"pass_k": 1, "sample_rows": 2},
        "online": {
            "enabled": True,
            "port": 0,
            "batch_size": batch,
            "user": {"enabled": True, "noise": 0.2},
            **(online or {}),
        },
        "tracking": {"registered_model_name": None, "system_metrics": False},
    }
    path = root / "online_tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
