"""Per-token log-probabilities and entropy from logits."""

from __future__ import annotations

import torch


def logprobs_from_logits(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``log softmax(logits / temperature)[token]`` per position.

    Args:
        logits: ``[..., V]``.
        tokens: ``[...]`` token ids.
        temperature: Sampling temperature the tokens were drawn with.
    """
    scaled = logits.float() / temperature
    picked = torch.log_softmax(scaled, dim=-1).gather(-1, tokens.unsqueeze(-1))
    return picked.sum(dim=-1)  # drops the size-1 dim without returning a view


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of ``softmax(logits / temperature)`` per position (``[..., V]`` → ``[...]``)."""
    scaled = logits.float() / temperature
    logp = torch.log_softmax(scaled, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)
