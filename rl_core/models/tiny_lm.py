"""A tiny Qwen2 causal LM with a character-level tokenizer, built locally (no downloads).

Used by tests and the reasoning presets: ``python scripts/build_tiny_lm.py OUT_DIR``
writes a directory that ``AutoModelForCausalLM.from_pretrained`` and
``AutoTokenizer.from_pretrained`` load offline. With the defaults the model has about
0.11 M parameters; every byte (every ASCII character) is one token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2Tokenizer

SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>")


def byte_symbols() -> list[str]:
    """The 256 printable stand-ins of byte-level BPE (GPT-2's ``bytes_to_unicode``)."""
    visible = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = iter(range(256, 512))
    return [chr(b) if b in visible else chr(next(extra)) for b in range(256)]


#: The role of each of :data:`SPECIAL_TOKENS` (``pad_token``, ``eos_token``...).
SPECIAL_ROLES: dict[str, str | None] = {
    "pad_token": "<pad>",
    "eos_token": "<eos>",
    "bos_token": "<bos>",
    "unk_token": "<unk>",
}


def build_char_tokenizer(
    chat_template: str | None = None,
    special_tokens: tuple[str, ...] = SPECIAL_TOKENS,
    roles: dict[str, str | None] | None = None,
) -> Qwen2Tokenizer:
    """A byte-level tokenizer with no merges: one token per byte (per ASCII character).

    It is a plain :class:`~transformers.Qwen2Tokenizer` (byte-level BPE whose vocabulary is
    the special tokens plus the 256 byte symbols), so ``AutoTokenizer.from_pretrained``
    rebuilds exactly the same tokenizer from the saved files.

    Args:
        chat_template: Optional Jinja chat template stored with the tokenizer.
        special_tokens: The special tokens, ids 0, 1, ... in this order; each is one token
            wherever it appears in a text.
        roles: ``pad_token``, ``eos_token``, ``bos_token``, ``unk_token`` → one of
            ``special_tokens`` or None (default :data:`SPECIAL_ROLES`); the special tokens
            without a role are extra special tokens (e.g. a chat template's markers).

    Returns:
        The tokenizer; ``decode(encode(text)) == text`` for any text.
    """
    roles = dict(SPECIAL_ROLES if roles is None else roles)
    unknown = {t for t in roles.values() if t is not None} - set(special_tokens)
    if unknown:
        raise ValueError(f"roles name tokens that are not special tokens: {sorted(unknown)}")
    vocab = {tok: i for i, tok in enumerate(special_tokens)}
    for symbol in byte_symbols():
        vocab[symbol] = len(vocab)
    extra = [t for t in special_tokens if t not in roles.values()]
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=[],
        unk_token=roles.get("unk_token"),
        bos_token=roles.get("bos_token"),
        eos_token=roles.get("eos_token"),
        pad_token=roles.get("pad_token"),
        clean_up_tokenization_spaces=False,
        **({"additional_special_tokens": extra} if extra else {}),
    )
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


def tiny_qwen2_config(vocab_size: int, **overrides: Any) -> Qwen2Config:
    """The default tiny architecture; ``overrides`` change fields.

    Two layers of width 64 with two query heads and one key/value head: a head dimension of
    32, the smallest vLLM's CPU attention has a kernel for.
    """
    fields: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 256,
        "tie_word_embeddings": True,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
    }
    fields.update(overrides)
    return Qwen2Config(**fields)


def create_tiny_lm(
    out_dir: str | Path, seed: int = 0, chat_template: str | None = None, **overrides: Any
) -> Path:
    """Write a freshly initialised tiny model and its tokenizer to ``out_dir``.

    Args:
        out_dir: Target directory (created).
        seed: Seed of the weight initialisation.
        chat_template: Optional chat template for the tokenizer.
        **overrides: :class:`~transformers.Qwen2Config` fields to change.

    Returns:
        ``out_dir`` as a path.
    """
    out = Path(out_dir)
    tokenizer = build_char_tokenizer(chat_template)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_qwen2_config(len(tokenizer), **overrides))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
