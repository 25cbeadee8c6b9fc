"""From dataset rows to prompt token ids: template, chat template, length check."""

from __future__ import annotations

from typing import Any

from rl_core.data import PromptSample
from rl_core.data.sources import PROMPT_SOURCES


class PromptError(ValueError):
    """A prompt cannot be used (too long for ``data.max_prompt_length``)."""


def load_task_samples(data_cfg: Any) -> tuple[list[PromptSample], list[PromptSample]]:
    """Training and held-out samples of the prompt source ``data.source`` names.

    Raises:
        rl_core.data.DataFileError: A file is missing, unreadable, or has bad rows (with
            ``data.on_bad_row: error``).
    """
    return PROMPT_SOURCES.get(data_cfg.source).load(data_cfg)


def prompt_text(sample: PromptSample, data_cfg: Any, tokenizer: Any) -> str:
    """The text the model sees: the template, wrapped in the chat template if there is one."""
    text = data_cfg.prompt_template.format(prompt=sample.prompt)
    if data_cfg.apply_chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": text}]
        if data_cfg.system_prompt:
            messages.insert(0, {"role": "system", "content": data_cfg.system_prompt})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if data_cfg.system_prompt:
        return f"{data_cfg.system_prompt}\n{text}"
    return text


def encode_prompts(samples: list[PromptSample], data_cfg: Any, tokenizer: Any) -> list[list[int]]:
    """Token ids of each sample's prompt.

    Raises:
        PromptError: A prompt longer than ``data.max_prompt_length`` (names its source).
    """
    encoded = []
    for sample in samples:
        ids = tokenizer(prompt_text(sample, data_cfg, tokenizer), add_special_tokens=False)[
            "input_ids"
        ]
        if len(ids) > data_cfg.max_prompt_length:
            raise PromptError(
                f"prompt of {sample.source or 'a sample'} has {len(ids)} tokens, more than "
                f"data.max_prompt_length = {data_cfg.max_prompt_length}"
            )
        encoded.append(list(ids))
    return encoded
