"""The model of ``gpu_step.py``: a Qwen2-0.5B-shaped causal LM with random weights, built
from a ``transformers`` config and saved with the project's byte-level tokenizer (nothing
downloaded); the cards' bf16 dense peaks for MFU."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config
from transformers.utils import logging as hf_logging

from rl_core.models.tiny_lm import build_char_tokenizer

hf_logging.disable_progress_bar()  # "Loading weights" bars between the figures

#: Qwen2-0.5B's architecture (its embeddings are tied to the output layer).
QWEN2_05B = {
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}
#: The ``--tiny`` shape (CPU): the vocabulary is larger than the tokenizer's, as above.
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 176,
    "vocab_size": 1024,
}
#: bf16 dense peak TFLOPS by a substring of ``torch.cuda.get_device_name()`` (first match).
PEAK_TFLOPS = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
)


def peak_tflops(device_name: str) -> float | None:
    """The card's bf16 dense peak (None for a card not in :data:`PEAK_TFLOPS`)."""
    return next((tf for key, tf in PEAK_TFLOPS if key in device_name), None)


def build_model_dir(out: Path, shape: dict, max_positions: int, device: torch.device) -> Path:
    """Write a random-weight Qwen2 of ``shape`` and the byte-level tokenizer to ``out``.

    The weights are bf16 on CUDA, float32 on the CPU (bf16 is very slow there).
    """
    tokenizer = build_char_tokenizer()
    config = Qwen2Config(
        **shape,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=model_dtype(device))
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def model_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA, float32 on the CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def count_parameters(model: torch.nn.Module) -> int:
    """Parameters, tied ones once."""
    return sum(p.numel() for p in model.parameters())
