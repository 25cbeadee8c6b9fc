"""Layers of a critic ensemble: E independent MLPs evaluated as one batched network.

Every layer works on ``[E, B, features]`` tensors, so an ensemble of 10 critics costs a few
batched matrix products instead of 10 separate forward passes. Used by the off-policy
policies (:mod:`rl_core.models.sac_policy`): plain critics (SAC), LayerNorm critics (RLPD)
and batch-renormalized critics (CrossQ).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers: ``[E, B, in] -> [E, B, out]``.

    Initialized like :class:`torch.nn.Linear` (uniform in ``±1/sqrt(in)``), member by member.

    Args:
        members: Ensemble size ``E``.
        in_features: Input width.
        out_features: Output width.
    """

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(members, 1, out_features))
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply every member to its slice of ``x``."""
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """Layer normalization over features, with a scale and shift per member."""

    def __init__(self, members: int, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members, 1, features))
        self.bias = nn.Parameter(torch.zeros(members, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize each row of ``[E, B, F]`` and apply the member's affine map."""
        normed = nn.functional.layer_norm(x, x.shape[-1:], eps=self.eps)
        return normed * self.weight + self.bias


class EnsembleBatchRenorm(nn.Module):
    """Batch renormalization (Ioffe, 2017) per member, as CrossQ uses in its critics.

    In training mode the batch statistics normalize the input, corrected towards the
    running statistics by ``r`` (clipped to ``[1/r_max, r_max]``) and ``d`` (clipped to
    ``±d_max``); both corrections are off (``r = 1``, ``d = 0``) for the first
    ``warmup_steps`` training calls, which makes it plain batch normalization. In eval mode
    the running statistics are used.

    Args:
        members: Ensemble size.
        features: Feature width.
        momentum: Running-statistics update rate.
        r_max: Bound of the scale correction.
        d_max: Bound of the shift correction.
        warmup_steps: Training calls before the corrections apply.
        eps: Variance floor.
    """

    def __init__(
        self,
        members: int,
        features: int,
        momentum: float = 0.01,
        r_max: float = 3.0,
        d_max: float = 5.0,
        warmup_steps: int = 10_000,
        eps: float = 1e-3,
    ) -> None:
        super().__init__()
        self.momentum, self.r_max, self.d_max, self.eps = momentum, r_max, d_max, eps
        self.warmup_steps = warmup_steps
        self.weight = nn.Parameter(torch.ones(members, 1, features))
        self.bias = nn.Parameter(torch.zeros(members, 1, features))
        self.register_buffer("running_mean", torch.zeros(members, 1, features))
        self.register_buffer("running_var", torch.ones(members, 1, features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``[E, B, F]`` over the batch axis (training) or by running stats."""
        if not self.training:
            normed = (x - self.running_mean) / torch.sqrt(self.running_var + self.eps)
            return normed * self.weight + self.bias
        mean = x.mean(dim=1, keepdim=True)
        var = x.var(dim=1, unbiased=False, keepdim=True)
        std = torch.sqrt(var + self.eps)
        normed = (x - mean) / std
        running_std = torch.sqrt(self.running_var + self.eps)
        r = (std.detach() / running_std).clamp(1.0 / self.r_max, self.r_max)
        d = ((mean.detach() - self.running_mean) / running_std).clamp(-self.d_max, self.d_max)
        # chosen on the tensors' device: no host round trip per call on a GPU
        normed = torch.where(self.steps >= self.warmup_steps, normed * r + d, normed)
        with torch.no_grad():
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
            self.steps += 1
        return normed * self.weight + self.bias


#: Normalization inserted after each hidden linear layer of a critic, by name.
CRITIC_NORMS: dict[str, Callable[[int, int], nn.Module] | None] = {
    "none": None,
    "layer_norm": EnsembleLayerNorm,
    "batch_renorm": EnsembleBatchRenorm,
}


def ensemble_mlp(members: int, sizes: list[int], norm: str) -> nn.Sequential:
    """An ensemble MLP ``sizes[0] -> ... -> sizes[-1]`` with ReLU and optional normalization.

    Args:
        members: Ensemble size.
        sizes: Layer widths, input first.
        norm: A key of :data:`CRITIC_NORMS` (applied after every hidden linear layer; for
            ``batch_renorm`` also to the input, as CrossQ does).
    """
    make_norm = CRITIC_NORMS[norm]
    layers: list[nn.Module] = []
    if norm == "batch_renorm" and make_norm is not None:
        layers.append(make_norm(members, sizes[0]))
    for i in range(len(sizes) - 1):
        layers.append(EnsembleLinear(members, sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            if make_norm is not None:
                layers.append(make_norm(members, sizes[i + 1]))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def ensemble_q_values(
    critics: nn.Module, members: int, states: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    """Q-values ``[E, B]`` of every member of an ensemble critic ``Q(s, a)``.

    Args:
        critics: An :func:`ensemble_mlp` of ``members`` members with one output.
        members: Its ensemble size ``E``.
        states: Observations ``[B, D]``.
        actions: Actions ``[B, A]``, as the critics take them.
    """
    inputs = torch.cat([states, actions], dim=-1)
    return critics(inputs.unsqueeze(0).expand(members, -1, -1)).squeeze(-1)
