"""Target networks of the actor-critic family: slow copies that the TD targets read."""

from __future__ import annotations

import torch
from torch import nn


def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """Move ``target``'s parameters towards ``online``'s: ``θ̂ ← (1 - τ) θ̂ + τ θ``.

    Buffers (running statistics of normalization layers) are copied as they are.

    Args:
        target: The target network (same structure as ``online``).
        online: The trained network.
        tau: Polyak rate in ``(0, 1]`` (1 copies).
    """
    with torch.no_grad():
        torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)
        for mine, theirs in zip(target.buffers(), online.buffers(), strict=True):
            mine.copy_(theirs)
