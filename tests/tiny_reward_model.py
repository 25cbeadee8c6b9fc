"""A tiny reward model directory for tests: the tiny LM's backbone with a seeded scalar head."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch


def build_tiny_reward_model(lm_dir: Path, out: Path, seed: int = 0) -> Path:
    """Save a one-label sequence classifier built on the tiny LM at ``lm_dir`` into ``out``.

    The tiny LM is created at ``lm_dir`` first when missing.
    """
    from rl_core.models.reward_model import load_reward_model
    from rl_core.models.tiny_lm import create_tiny_lm

    if not (lm_dir / "config.json").is_file():
        create_tiny_lm(str(lm_dir), seed=seed)
    torch.manual_seed(seed)
    settings = SimpleNamespace(
        model_path=str(lm_dir),
        trust_remote_code=False,
        dtype="float32",
        attn_implementation="sdpa",
        gradient_checkpointing=False,
    )
    policy = load_reward_model(settings)
    policy.model.save_pretrained(out)
    policy.tokenizer.save_pretrained(out)
    return out
