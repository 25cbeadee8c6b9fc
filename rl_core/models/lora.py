"""LoRA adapters (PEFT) on a Hugging Face causal LM: build, name, extract, merge.

The trainer and every rollout engine wrap their copy of the model the same way
(:func:`add_lora`), so the adapters' tensors have the same names on both sides and a weight
sync can send them alone (:func:`adapter_tensors`).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rl_core.config.llm_sections import ALL_LINEAR

#: The substring that marks a LoRA adapter tensor in a PEFT model's state dict.
ADAPTER_MARK = ".lora_"


def peft_config(lora_cfg: Any) -> Any:
    """The ``peft.LoraConfig`` of an ``actor.lora`` section."""
    from peft import LoraConfig

    targets = list(lora_cfg.target_modules)
    return LoraConfig(
        r=int(lora_cfg.rank),
        lora_alpha=float(lora_cfg.alpha),
        lora_dropout=float(lora_cfg.dropout),
        target_modules=ALL_LINEAR if targets == [ALL_LINEAR] else targets,
        bias="none",
        task_type="CAUSAL_LM",
    )


def add_lora(model: nn.Module, lora_cfg: Any) -> nn.Module:
    """``model`` wrapped with fresh LoRA adapters (a ``peft.PeftModel``; base weights frozen).

    The adapters' ``B`` matrices start at zero, so the wrapped model computes what
    ``model`` did.

    Raises:
        ValueError: No module of ``model`` matches ``actor.lora.target_modules``.
    """
    from peft import get_peft_model

    try:
        with warnings.catch_warnings():  # PEFT asks transformers a deprecated question
            warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
            return get_peft_model(model, peft_config(lora_cfg))
    except ValueError as exc:  # PEFT: "Target modules {...} not found in the base model"
        raise ValueError(
            f"actor.lora.target_modules = {list(lora_cfg.target_modules)}: {exc} (allowed: "
            "names of the model's linear layers, e.g. q_proj, v_proj, or all-linear)"
        ) from None


def is_adapter_name(name: str) -> bool:
    """Whether a state-dict key names a LoRA adapter tensor."""
    return ADAPTER_MARK in name


def adapter_tensors(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The LoRA adapter tensors of a state dict (names unchanged)."""
    return {k: v for k, v in state_dict.items() if is_adapter_name(k)}


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters an optimizer updates.

    All of them without LoRA; with it, the adapters and any head outside the language
    model, such as a value head.
    """
    return [p for p in model.parameters() if p.requires_grad]


def merged_model(peft_model: nn.Module) -> nn.Module:
    """The plain Hugging Face model with the adapters folded into its weights."""
    return peft_model.merge_and_unload()


def with_lora(policy: nn.Module, lora_cfg: Any) -> nn.Module:
    """Wrap ``policy.model`` (a causal LM policy's Hugging Face model) with LoRA adapters.

    The policy then trains its adapters (and heads of its own, such as a value head) only,
    and hands out only the adapters for rollout engines (``policy.adapter_only``).
    """
    policy.model = add_lora(policy.model, lora_cfg)
    policy.adapter_only = True
    return policy


def load_adapter_state(policy: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load a LoRA checkpoint's tensors (adapters and trainable heads) into ``policy``.

    Raises:
        ValueError: ``state`` lacks a trainable tensor of ``policy`` or holds one it does
            not have (another rank, other target modules, or not a LoRA checkpoint).
    """
    trainable = {name for name, p in policy.named_parameters() if p.requires_grad}
    missing = sorted(trainable - set(state))
    unexpected = sorted(set(state) - set(policy.state_dict()))
    if missing or unexpected:
        raise ValueError(
            "the adapter weights do not fit this model's LoRA adapters "
            f"(missing {missing[:3]}{'...' if len(missing) > 3 else ''}, unexpected "
            f"{unexpected[:3]}{'...' if len(unexpected) > 3 else ''}); check actor.lora "
            "(rank, target_modules) against the run that wrote them"
        )
    policy.load_state_dict(state, strict=False)


#: Files whose bytes make a base model's fingerprint (weights and the architecture).
_FINGERPRINTED = ("config.json", "*.safetensors", "*.bin")


def base_fingerprint(model_path: str | Path) -> str:
    """12 hex digits that change when the base model's weights or config change.

    LoRA checkpoints hold the adapters only, so they are valid on this base alone. Streams
    every weight file (about a second per GB).

    Raises:
        OSError: A file cannot be read.
    """
    root = Path(model_path)
    digest = hashlib.sha256()
    files = sorted({p for pattern in _FINGERPRINTED for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:12]
