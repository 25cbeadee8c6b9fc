"""Small local stand-ins for hub models: the same architecture and tokenizer conventions.

A stand-in lets a preset written for a real model (``grpo_gsm8k_qwen05b``: Qwen2.5-0.5B-
Instruct) load and run end to end on a CPU without downloading anything: its config has
the real model's shape except for the sizes (layers, widths, vocabulary), and its
tokenizer carries the real model's special tokens and chat template on top of the
byte-level vocabulary of :mod:`rl_core.models.tiny_lm`. Its weights are random: it shows
that a run works, not what it learns.

``python scripts/build_standin.py OUT_DIR`` writes one (with GSM8K-format data files).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

from rl_core.models.tiny_lm import build_char_tokenizer, tiny_qwen2_config

#: Qwen2.5-Instruct's chat format (ChatML) for conversations without tools: a system turn
#: (Qwen's default system prompt when the conversation has none), then every turn as
#: ``<|im_start|>role\\ncontent<|im_end|>\\n``, then ``<|im_start|>assistant\\n`` to
#: generate from. It renders such conversations as the template of Qwen2.5-Instruct's
#: ``tokenizer_config.json`` does (that template also formats tool calls).
QWEN25_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (loop.first and message['role'] == 'system') %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


@dataclass(frozen=True)
class StandIn:
    """How to build the stand-in of one hub model.

    Attributes:
        hub_id: The model it stands in for.
        config: :class:`~transformers.Qwen2Config` fields (the real model's, sizes shrunk).
        special_tokens: Special tokens, in id order.
        roles: ``pad_token``/``eos_token``/``bos_token``/``unk_token`` → a special token.
        chat_template: The tokenizer's chat template.
        generation: ``generation_config.json`` fields other than the token ids: sampling
            defaults like those the real model ships (rollouts must not pick them up).
        eos_tokens: Tokens whose ids are the generation config's ``eos_token_id``.
    """

    hub_id: str
    config: dict[str, Any]
    special_tokens: tuple[str, ...]
    roles: dict[str, str | None]
    chat_template: str
    generation: dict[str, Any] = field(default_factory=dict)
    eos_tokens: tuple[str, ...] = ()


#: Qwen/Qwen2.5-0.5B-Instruct has 24 layers of width 896 (MLP 4864), 14 query and 2
#: key/value heads of 64, a vocabulary of 151,936 and tied embeddings; rope theta 1e6,
#: RMSNorm eps 1e-6, 32,768 positions, no sliding window. The stand-in keeps all but the
#: sizes: 2 layers of width 64 (MLP 352), 2 query heads and 1 key/value head of 32 (the
#: smallest head vLLM's CPU attention has a kernel for), the byte-level vocabulary.
QWEN25_05B_INSTRUCT = StandIn(
    hub_id="Qwen/Qwen2.5-0.5B-Instruct",
    config={
        "hidden_size": 64,
        "intermediate_size": 352,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32768,
        "max_window_layers": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "hidden_act": "silu",
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
    },
    special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    # Qwen2.5-Instruct: no BOS token, <|im_end|> ends a turn, <|endoftext|> pads
    roles={
        "pad_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "bos_token": None,
        "unk_token": None,
    },
    chat_template=QWEN25_CHAT_TEMPLATE,
    generation={
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 20,
        "repetition_penalty": 1.1,
    },
    eos_tokens=("<|im_end|>", "<|endoftext|>"),
)

#: ``--like`` names of :func:`create_standin`.
STANDINS: dict[str, StandIn] = {"qwen2.5-0.5b-instruct": QWEN25_05B_INSTRUCT}


def create_standin(out_dir: str | Path, like: str = "qwen2.5-0.5b-instruct", seed: int = 0) -> Path:
    """Write the stand-in of a hub model (random weights, float32) to ``out_dir``.

    Args:
        out_dir: Target directory (created); it loads with ``from_pretrained``.
        like: A key of :data:`STANDINS`.
        seed: Seed of the weight initialisation.

    Returns:
        ``out_dir`` as a path.

    Raises:
        ValueError: ``like`` names no stand-in.
    """
    spec = STANDINS.get(like.lower())
    if spec is None:
        raise ValueError(f"no stand-in like {like!r}; known: {', '.join(sorted(STANDINS))}")
    tokenizer = build_char_tokenizer(spec.chat_template, spec.special_tokens, spec.roles)
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in spec.special_tokens}
    pad, eos = ids[spec.roles["pad_token"]], ids[spec.roles["eos_token"]]
    config = tiny_qwen2_config(
        len(tokenizer),
        **spec.config,
        pad_token_id=None,
        bos_token_id=pad,
        eos_token_id=eos,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config = GenerationConfig(
        bos_token_id=pad,
        pad_token_id=pad,
        eos_token_id=[ids[t] for t in spec.eos_tokens] or eos,
        **spec.generation,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
