"""From dataset rows to prompt token ids: template, chat template, length check."""

from __future__ import annotations

import logging
from typing import Any

from rl_core.data import PromptSample
from rl_core.data.sources import PROMPT_SOURCES

logger = logging.getLogger(__name__)


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
    """The text the model sees.

    A text prompt goes through ``data.prompt_template`` and, when the tokenizer has one and
    ``data.apply_chat_template`` is on, the chat template as a user message (after
    ``data.system_prompt``). A prompt of chat messages (verl's rows) is rendered as it is
    with the chat template (``data.system_prompt`` first unless it has a system message);
    without a chat template its messages' contents are joined by new lines.
    """
    if sample.messages:
        messages = [dict(m) for m in sample.messages]
        if data_cfg.system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": data_cfg.system_prompt})
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return "\n".join(m["content"] for m in messages)
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
    return _encode(samples, data_cfg, tokenizer, drop_overlong=False)[1]


def fit_prompts(
    samples: list[PromptSample], data_cfg: Any, tokenizer: Any
) -> tuple[list[PromptSample], list[list[int]]]:
    """The samples whose prompts fit ``data.max_prompt_length``, with their token ids.

    With ``data.filter_overlong_prompts`` the longer ones are left out and counted in the
    log; without it the first one stops the run.

    Raises:
        PromptError: A prompt too long (without filtering), or every prompt too long.
    """
    return _encode(samples, data_cfg, tokenizer, data_cfg.filter_overlong_prompts)


def _encode(
    samples: list[PromptSample], data_cfg: Any, tokenizer: Any, drop_overlong: bool
) -> tuple[list[PromptSample], list[list[int]]]:
    limit = data_cfg.max_prompt_length
    kept: list[PromptSample] = []
    encoded: list[list[int]] = []
    for sample in samples:
        text = prompt_text(sample, data_cfg, tokenizer)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > limit:
            if drop_overlong:
                continue
            raise PromptError(
                f"prompt of {sample.source or 'a sample'} has {len(ids)} tokens, more than "
                f"data.max_prompt_length = {limit} (data.filter_overlong_prompts=true leaves "
                "such prompts out)"
            )
        kept.append(sample)
        encoded.append(list(ids))
    dropped = len(samples) - len(kept)
    if dropped:
        if not kept:
            raise PromptError(
                f"all {len(samples)} prompts are longer than data.max_prompt_length = {limit}"
            )
        logger.warning(
            "left out %d of %d prompts longer than data.max_prompt_length = %d tokens",
            dropped,
            len(samples),
            limit,
        )
    return kept, encoded
