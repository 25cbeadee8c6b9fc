"""A tiny GRPO config for in-process training tests: a 1-layer model, 4 prompts x 4
responses of 4 tokens, a large learning rate so weights move, no MLflow."""

from __future__ import annotations

from pathlib import Path

from rl_core.config import RLPipeConfig, load_config

TINY_GRPO = (
    "data.prompts_per_batch=4",
    "data.eval_size=4",
    "algorithm.group_size=4",
    "rollout.max_new_tokens=4",
    "actor.micro_batch_size=8",
    "actor.lr=1e-2",
    "tracking.enabled=false",
)


def tiny_grpo_config(model: Path, *extra: str) -> RLPipeConfig:
    """``grpo_arith`` on the model at ``model`` (no warm start), :data:`TINY_GRPO`, ``extra``."""
    return load_config(
        "grpo_arith", ["run.warm_start=null", f"model.model_path={model}", *TINY_GRPO, *extra]
    )
