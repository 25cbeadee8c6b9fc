"""Random draws for policies whose seeded generator may live on another device.

A worker's generator is a CPU ``torch.Generator`` seeded from the run seed, while the
policy may run on a GPU. The draws are taken on the generator's device and moved to the
policy's, so a run samples the same numbers wherever its policy lives (and the CPU path is
unchanged).
"""

from __future__ import annotations

import torch


def _draw_device(reference: torch.Tensor, generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else reference.device


def standard_normal_like(
    reference: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Standard normal noise shaped like ``reference``, on its device and dtype.

    Args:
        reference: Tensor whose shape, device and dtype the noise takes.
        generator: Drives the draw (None: torch's global generator).
    """
    noise = torch.randn(
        reference.shape, generator=generator, device=_draw_device(reference, generator)
    )
    return noise.to(device=reference.device, dtype=reference.dtype)


def multinomial_on_device(
    probs: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One category index per row of ``probs`` (``[B]``), on ``probs``' device.

    Args:
        probs: Row-wise probabilities ``[B, K]``.
        generator: Drives the draw (None: torch's global generator).
    """
    device = _draw_device(probs, generator)
    draws = torch.multinomial(probs.detach().to(device), 1, generator=generator)
    return draws.squeeze(-1).to(probs.device)
