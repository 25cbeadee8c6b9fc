"""Scoring with a model: a classifier reward model's head, or a judge's parsed reply.

A scorer is registered by ``reward.model.kind`` (:data:`MODEL_SCORERS`), built once per
reward-model worker from a local model directory, and scores lists of prompts and
responses in batches. It returns raw scores (before ``score_scale``/``score_offset``) and,
per row, the reason it has no score (a model failure) or None.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_core.registry import Registry
from rl_core.rewards.model_reward import (
    JudgeParseError,
    format_judge_prompt,
    parse_judge_reply,
)

logger = logging.getLogger(__name__)
#: ``reward.model.kind`` → scorer class ``cls(path, model_cfg, device)``.
MODEL_SCORERS: Registry[Any] = Registry("model scorer", "rl_core.rewards.model_scorers")


@dataclass
class ModelScores:
    """Raw scores of a list of rows.

    Attributes:
        scores: One score per row (NaN where the model gave none).
        failures: Per row, why the model gave no score (a model failure), or None.
    """

    scores: list[float]
    failures: list[str | None]

    def as_rows(self, seconds: float) -> dict[str, list[Any] | float]:
        """``scores``, ``failures`` (a non-finite score is a failure too) and ``seconds``."""
        scores = [float(s) for s in self.scores]
        failures = [
            f if f is not None or math.isfinite(s) else "the model returned a non-finite score"
            for s, f in zip(scores, self.failures, strict=True)
        ]
        return {"scores": scores, "failures": failures, "seconds": seconds}


@MODEL_SCORERS.decorator("classifier")
class ClassifierScorer:
    """A reward model (one-label sequence classifier): its scalar head's output per text.

    Args:
        path: The model directory.
        model_cfg: The ``reward.model`` section (``batch_size``, ``max_length``).
        device: Where the model runs.
    """

    def __init__(self, path: str, model_cfg: Any, device: torch.device) -> None:
        from rl_core.models.reward_model import load_reward_model, local_model_settings

        self.policy = load_reward_model(local_model_settings(path)).eval().to(device)
        self.cfg = model_cfg

    @property
    def module(self) -> torch.nn.Module:
        """The model (moved between devices by a collocated worker)."""
        return self.policy

    def score(self, prompts: Sequence[str], responses: Sequence[str]) -> ModelScores:
        """The head's output for each ``prompt + response``; never a model failure."""
        from rl_core.models.reward_model import score_texts

        scores = score_texts(
            self.policy, prompts, responses, self.cfg.batch_size, self.cfg.max_length
        )
        return ModelScores(scores, [None] * len(scores))


@MODEL_SCORERS.decorator("judge")
class JudgeScorer:
    """A causal LM judge: greedy reply to the template, score read by the parser.

    Args:
        path: The causal LM directory.
        model_cfg: The ``reward.model`` section (template, parser, batch and reply sizes).
        device: Where the model runs.
    """

    def __init__(self, path: str, model_cfg: Any, device: torch.device) -> None:
        from rl_core.models.causal_lm import load_causal_lm
        from rl_core.models.reward_model import local_model_settings

        model, tokenizer = load_causal_lm(local_model_settings(path))
        self.model = model.eval().to(device)
        self.tokenizer = tokenizer
        self.cfg = model_cfg
        self.device = device

    @property
    def module(self) -> torch.nn.Module:
        """The model (moved between devices by a collocated worker)."""
        return self.model

    def replies(self, prompts: Sequence[str], responses: Sequence[str]) -> list[str]:
        """The judge's greedy reply to each row's filled template."""
        texts = [
            format_judge_prompt(self.cfg.template, p, r)
            for p, r in zip(prompts, responses, strict=True)
        ]
        pad = int(self.tokenizer.pad_token_id)
        out: list[str] = []
        for start in range(0, len(texts), self.cfg.batch_size):
            ids = [
                self._encode(t)[-(self.cfg.max_length or 0) :]
                for t in texts[start : start + self.cfg.batch_size]
            ]
            width = max(len(t) for t in ids)
            input_ids = torch.tensor([[pad] * (width - len(t)) + t for t in ids])
            mask = torch.tensor([[0] * (width - len(t)) + [1] * len(t) for t in ids])
            with torch.no_grad():
                generated = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    max_new_tokens=self.cfg.max_new_tokens,
                    do_sample=False,
                    pad_token_id=pad,
                )
            for row in generated[:, width:].tolist():
                out.append(self.tokenizer.decode(row, skip_special_tokens=True))
        return out

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def score(self, prompts: Sequence[str], responses: Sequence[str]) -> ModelScores:
        """Parsed scores of the judge's replies; a reply without one is a model failure."""
        scores: list[float] = []
        failures: list[str | None] = []
        for reply in self.replies(prompts, responses):
            try:
                scores.append(parse_judge_reply(self.cfg.parser, reply))
                failures.append(None)
            except JudgeParseError as exc:
                scores.append(float("nan"))
                failures.append(str(exc))
        return ModelScores(scores, failures)


def build_scorer(path: str, model_cfg: Any, device: torch.device) -> Any:
    """The scorer of ``model_cfg.kind`` for the model directory ``path``."""
    return MODEL_SCORERS.get(model_cfg.kind)(path, model_cfg, device)
