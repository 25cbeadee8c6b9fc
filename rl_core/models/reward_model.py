"""Reward models: a Hugging Face causal LM backbone with a scalar head (``hf_reward_model``).

The model is ``AutoModelForSequenceClassification`` with ``num_labels=1``: the backbone of
``model.model_path`` (a causal LM such as the tiny test model or an SFT export; its
language-model head is dropped) and a linear ``score`` head read at the last token that
is not padding. An exported reward model is a plain Hugging Face directory, so
``AutoModelForSequenceClassification.from_pretrained(path)`` loads it too.

A text scored is ``prompt + response`` (no chat template, no special tokens), right-padded;
:func:`score_texts` scores ``(prompt, response)`` pairs with a model or a model directory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rl_core.llm.batching import pad_right
from rl_core.models.base_policy import BasePolicy, policy_device

logger = logging.getLogger(__name__)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class RewardModelPolicy(BasePolicy):
    """A sequence-classification model with one output: the reward of a text.

    Args:
        model: The Hugging Face ``...ForSequenceClassification`` model (``num_labels=1``,
            ``pad_token_id`` set).
        tokenizer: Its tokenizer.
    """

    export_format = "hf_pretrained"
    forward_types = ("default_forward",)

    def __init__(self, model: nn.Module, tokenizer: Any) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer

    def pretrained_model(self) -> nn.Module:
        """The wrapped Hugging Face model."""
        return self.model

    def pretrained_tokenizer(self) -> Any:
        """The tokenizer (saved next to the model by the converter)."""
        return self.tokenizer

    def default_forward(
        self, forward_inputs: dict[str, torch.Tensor], **kwargs: Any
    ) -> dict[str, torch.Tensor]:
        """Rewards ``[N]`` of right-padded texts.

        Args:
            forward_inputs: ``input_ids`` and ``attention_mask`` ``[N, L]``.
            **kwargs: Ignored (callers may pass options other policies use).
        """
        out = self.model(
            input_ids=forward_inputs["input_ids"],
            attention_mask=forward_inputs["attention_mask"],
            use_cache=False,
        )
        return {"rewards": out.logits.sum(dim=-1)}  # [N, 1] -> [N], not a view

    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "eval",
        compute_values: bool = False,
        **kwargs: Any,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Rewards of ``env_obs["input_ids"]`` (lists of token ids), as a float32 array."""
        ids, mask = pad_right([list(t) for t in env_obs["input_ids"]], self.pad_token_id)
        device = policy_device(self)
        forward = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
        rewards = self.default_forward(forward)["rewards"]
        return rewards.float().cpu().numpy(), {}

    @property
    def pad_token_id(self) -> int:
        """The padding token (the model pools at the last token that is not it)."""
        return int(self.model.config.pad_token_id)

    def encode(
        self, prompts: Sequence[str], responses: Sequence[str], max_length: int | None = None
    ) -> list[list[int]]:
        """Token ids of each ``prompt + response`` (see :func:`encode_texts`)."""
        return encode_texts(self.tokenizer, prompts, responses, max_length)


def encode_texts(
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    max_length: int | None = None,
) -> list[list[int]]:
    """Token ids of each ``prompt + response``, without special tokens.

    Args:
        tokenizer: The reward model's tokenizer.
        prompts: The prompts.
        responses: One response per prompt.
        max_length: Keep the last this many tokens of a longer text (None: all).

    Raises:
        ValueError: ``prompts`` and ``responses`` differ in length, or a text is empty.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses; give one each")
    encoded = []
    for prompt, response in zip(prompts, responses, strict=True):
        ids = list(tokenizer(prompt + response, add_special_tokens=False)["input_ids"])
        if not ids:
            raise ValueError(f"empty text to score (prompt {prompt!r}, response {response!r})")
        encoded.append(ids[-max_length:] if max_length else ids)
    return encoded


def encode_pairs(
    tokenizer: Any,
    pad_token_id: int,
    prompts: Sequence[str],
    chosen: Sequence[str],
    rejected: Sequence[str],
    max_length: int | None = None,
) -> dict[str, np.ndarray]:
    """A batch of preference pairs (:data:`~rl_core.training.reward_update.PAIR_KEYS`).

    The chosen and rejected texts (``prompt + response``) are right-padded to one length.

    Returns:
        ``chosen_ids``/``chosen_mask``/``rejected_ids``/``rejected_mask``, ``[N, L]`` int64.
    """
    good = encode_texts(tokenizer, prompts, chosen, max_length)
    bad = encode_texts(tokenizer, prompts, rejected, max_length)
    length = max(len(t) for t in [*good, *bad])
    chosen_ids, chosen_mask = pad_right(good, pad_token_id, length)
    rejected_ids, rejected_mask = pad_right(bad, pad_token_id, length)
    return {
        "chosen_ids": chosen_ids.long().numpy(),
        "chosen_mask": chosen_mask.long().numpy(),
        "rejected_ids": rejected_ids.long().numpy(),
        "rejected_mask": rejected_mask.long().numpy(),
    }


def load_reward_model(model_cfg: Any) -> RewardModelPolicy:
    """Build the reward model of ``model_cfg.model_path`` (a local directory only).

    A causal LM directory gets a new ``score`` head (initialised from torch's current
    random state); a reward model directory (an export) keeps its own.

    Raises:
        ValueError: No ``model_path``, or it is not a directory holding a model.
    """
    from transformers import AutoModelForSequenceClassification

    from rl_core.models.causal_lm import load_tokenizer

    path = getattr(model_cfg, "model_path", None)
    if not path or not (Path(path) / "config.json").is_file():
        raise ValueError(
            f"model.model_path = {path!r} is not a local Hugging Face model directory (no "
            "config.json); build the tiny test model with scripts/build_tiny_lm.py"
        )
    tokenizer = load_tokenizer(model_cfg)
    dtype = DTYPES[model_cfg.dtype] if model_cfg.dtype != "auto" else "auto"
    hf_logger = logging.getLogger("transformers.modeling_utils")
    level = hf_logger.level
    hf_logger.setLevel(logging.ERROR)  # "score.weight newly initialized" is the point here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            path,
            num_labels=1,
            pad_token_id=tokenizer.pad_token_id,
            dtype=dtype,
            trust_remote_code=model_cfg.trust_remote_code,
            local_files_only=True,
            attn_implementation=model_cfg.attn_implementation,
        )
    finally:
        hf_logger.setLevel(level)
    if model_cfg.gradient_checkpointing:
        enable = getattr(model, "activation_checkpointing_enable", None)  # new name
        (enable or model.gradient_checkpointing_enable)()
    return RewardModelPolicy(model, tokenizer)


def build_reward_model(model_cfg: Any, spaces: Any = None) -> RewardModelPolicy:
    """Model builder of ``hf_reward_model`` (``spaces`` is unused)."""
    return load_reward_model(model_cfg)


def local_model_settings(path: str | Path) -> Any:
    """``model`` settings loading the directory ``path`` in float32, without its own code."""
    from types import SimpleNamespace

    return SimpleNamespace(
        model_path=str(path),
        trust_remote_code=False,
        dtype="float32",
        attn_implementation="sdpa",
        gradient_checkpointing=False,
    )


def _policy_of(model: RewardModelPolicy | str | Path) -> RewardModelPolicy:
    if isinstance(model, RewardModelPolicy):
        return model
    return load_reward_model(local_model_settings(model)).eval()


@torch.no_grad()
def score_texts(
    model: RewardModelPolicy | str | Path,
    prompts: Sequence[str],
    responses: Sequence[str],
    batch_size: int = 64,
    max_length: int | None = None,
) -> list[float]:
    """Rewards of ``(prompt, response)`` pairs.

    Args:
        model: A :class:`RewardModelPolicy`, or a reward model directory (an rlpipe export,
            a registered version's files, or any ``...ForSequenceClassification`` directory
            with one label); loaded in float32, in eval mode, without the model's own code.
        prompts: The prompts.
        responses: One response per prompt.
        batch_size: Texts per forward pass.
        max_length: Keep the last this many tokens of a longer text (None: all).

    Returns:
        One reward per pair, in order.
    """
    policy = _policy_of(model)
    ids = policy.encode(prompts, responses, max_length)
    rewards: list[float] = []
    for start in range(0, len(ids), batch_size):
        scores, _ = policy.predict_action_batch({"input_ids": ids[start : start + batch_size]})
        rewards.extend(float(s) for s in scores)
    return rewards


def create_tiny_reward_model(path: str | Path, lm_dir: str | Path, seed: int = 0) -> Path:
    """Save a tiny reward model at ``path``: the tiny LM's backbone, a head seeded by ``seed``.

    The tiny test LM (:func:`rl_core.models.tiny_lm.create_tiny_lm`) is created at
    ``lm_dir`` first when missing. For tests and the fault matrix; it has learnt nothing.

    Returns:
        ``path``, a one-label sequence-classification directory.
    """
    from rl_core.models.tiny_lm import create_tiny_lm

    if not (Path(lm_dir) / "config.json").is_file():
        create_tiny_lm(str(lm_dir), seed=seed)
    torch.manual_seed(seed)
    policy = load_reward_model(local_model_settings(lm_dir))
    policy.model.save_pretrained(path)
    policy.tokenizer.save_pretrained(path)
    return Path(path)
