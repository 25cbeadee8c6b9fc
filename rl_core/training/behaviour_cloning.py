"""Behaviour cloning: the negative log-likelihood of demonstrated actions under the policy.

The policy turns demonstrations into the ``forward_inputs`` of its own rollouts
(:meth:`rl_core.models.base_policy.BasePolicy.demo_forward_inputs`), so the same
``default_forward`` that PPO trains gives the log-probability of each demonstrated action:
a policy cloned this way starts RL with the exact distribution RL then changes.
"""

from __future__ import annotations

import numpy as np
import torch

from rl_core.data.batch import to_torch_tree
from rl_core.data.demos import Demos
from rl_core.models.base_policy import BasePolicy, policy_device
from rl_core.training.nonfinite import SkippedUpdateGuard
from rl_core.training.optim import clip_gradients


def bc_step(
    policy: BasePolicy,
    optimizer: torch.optim.Optimizer,
    demos: Demos,
    batch_size: int,
    generator: torch.Generator,
    max_grad_norm: float | None,
    guard: SkippedUpdateGuard,
    iteration: int,
    lr: float,
) -> dict[str, float]:
    """One gradient step on ``batch_size`` demonstration steps drawn with ``generator``.

    Returns:
        ``train/bc_loss`` (mean negative log-likelihood per action), ``train/grad_norm``,
        ``train/entropy`` and ``train/skipped_updates`` (1 when the loss or the gradients
        were not finite and the step was skipped).
    """
    rows = torch.randint(len(demos), (batch_size,), generator=generator).numpy()
    device = policy_device(policy)
    obs = demos.env_obs(np.sort(rows))
    actions = demos.actions[np.sort(rows)]
    inputs = policy.demo_forward_inputs(obs, actions)
    inputs = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v
        for k, v in to_torch_tree(inputs).items()
    }
    out = policy.forward(
        "default_forward", forward_inputs=inputs, compute_values=False, compute_entropy=True
    )
    loss = -out["logprobs"].float().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = clip_gradients(policy.parameters(), max_grad_norm)
    finite = bool(torch.isfinite(loss)) and np.isfinite(norm)
    skipped = not guard.allow_step(finite, iteration, lr, "behaviour-cloning step")
    if not skipped:
        optimizer.step()
    return {
        "train/bc_loss": loss.item() if finite else 0.0,
        "train/grad_norm": float(norm) if finite else 0.0,
        "train/entropy": float(out["entropy"].detach().float().mean()),
        "train/skipped_updates": float(skipped),
    }
