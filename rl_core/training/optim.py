"""Optimizers, learning rates and gradient clipping of every trainer, from the ``actor`` section.

The PPO trainer, the LLM trainers (FSDP2 and megatron) and the off-policy learner (SAC,
CrossQ, RLPD) build their optimizers with :func:`build_optimizer`, set the learning rate of
an iteration with :func:`learning_rate` and :func:`set_learning_rate`, and clip gradients
with :func:`clip_gradients`, so ``actor.optimizer``, ``actor.lr``, ``actor.lr_schedule``,
``actor.warmup_iterations``, ``actor.weight_decay``, ``actor.adam_eps`` and
``actor.max_grad_norm`` mean the same thing to each of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from rl_core.registry import Registry
from rl_core.training.schedules import lr_at

#: Optimizer classes by ``actor.optimizer``.
OPTIMIZERS: Registry[type[torch.optim.Optimizer]] = Registry("optimizer")
OPTIMIZERS.register("adam", torch.optim.Adam)
OPTIMIZERS.register("adamw", torch.optim.AdamW)
OPTIMIZERS.register("sgd", torch.optim.SGD)
#: Optimizers that take ``eps``, ``betas`` and ``fused``.
ADAM_FAMILY = ("adam", "adamw")
#: Adam/AdamW epsilon of the PPO and LLM trainers when ``actor.adam_eps`` is None.
ADAM_EPS = 1e-5
#: Adam/AdamW epsilon of the off-policy learners when ``actor.adam_eps`` is None (torch's).
OFF_POLICY_ADAM_EPS = 1e-8


def adam_eps(actor_cfg: Any, default: float = ADAM_EPS) -> float:
    """``actor.adam_eps``, or ``default`` when it is None (unset).

    Args:
        actor_cfg: The ``actor`` section.
        default: The trainer's epsilon when the config leaves it unset.
    """
    eps = getattr(actor_cfg, "adam_eps", None)
    return default if eps is None else float(eps)


def build_optimizer(
    params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
    actor_cfg: Any,
    *,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    default_eps: float = ADAM_EPS,
    fused: bool | None = None,
) -> torch.optim.Optimizer:
    """The optimizer ``actor.optimizer`` names, over ``params`` (in their order).

    ``adam`` and ``adamw`` get ``lr``, ``weight_decay`` and ``eps``; ``sgd`` gets ``lr`` and
    ``weight_decay``. ``betas`` and ``fused`` are passed only when given (and only to the
    Adam family); otherwise torch's defaults hold.

    Args:
        params: Parameters, or parameter groups (dicts with ``params``).
        actor_cfg: The ``actor`` section (``optimizer``, ``lr``, ``weight_decay``,
            ``adam_eps``).
        lr: Initial learning rate (None: ``actor.lr``).
        weight_decay: Weight decay (None: ``actor.weight_decay``).
        betas: Adam/AdamW betas (None: torch's default).
        default_eps: Adam/AdamW epsilon when ``actor.adam_eps`` is None.
        fused: Adam/AdamW fused implementation (None: torch's default).

    Raises:
        ValueError: ``actor.optimizer`` is not one of :data:`OPTIMIZERS`.
    """
    name = actor_cfg.optimizer
    if name not in OPTIMIZERS:
        raise ValueError(
            f"actor.optimizer = {name!r} is unknown; allowed: {', '.join(OPTIMIZERS.names())}"
        )
    kwargs: dict[str, Any] = {
        "lr": actor_cfg.lr if lr is None else lr,
        "weight_decay": actor_cfg.weight_decay if weight_decay is None else weight_decay,
    }
    if name in ADAM_FAMILY:
        kwargs["eps"] = adam_eps(actor_cfg, default_eps)
        if betas is not None:
            kwargs["betas"] = betas
        if fused is not None:
            kwargs["fused"] = fused
    return OPTIMIZERS.get(name)(params, **kwargs)


def learning_rate(
    actor_cfg: Any, iteration: int, max_iterations: int, base_lr: float | None = None
) -> float:
    """The learning rate of a 0-based ``iteration`` under ``actor.lr_schedule``.

    Args:
        actor_cfg: The ``actor`` section (``lr``, ``lr_schedule``, ``warmup_iterations``).
        iteration: Current iteration (0-based).
        max_iterations: Iterations of the run (``run.max_iterations``).
        base_lr: Peak learning rate (None: ``actor.lr``); e.g. a critic's own rate, which
            then follows the same schedule and warm-up.
    """
    peak = actor_cfg.lr if base_lr is None else base_lr
    return lr_at(
        peak, iteration, max_iterations, actor_cfg.lr_schedule, actor_cfg.warmup_iterations
    )


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group of ``optimizer``."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def clip_gradients(params: Iterable[torch.Tensor], max_norm: float | None) -> float:
    """Clip the gradients of ``params`` to a global norm; returns the norm before clipping.

    Parameters without a gradient are left out. Clipping is
    ``torch.nn.utils.clip_grad_norm_`` (sharded gradients count with their full norm);
    ``max_norm=None`` clips nothing and only measures the norm, leaving the gradients
    untouched (even when it is not finite).

    Args:
        params: Parameters whose ``grad`` to clip.
        max_norm: Largest global norm (None: no clipping).

    Returns:
        The global 2-norm of the gradients (0.0 when no parameter has one).
    """
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    if max_norm is None:  # two calls instead of one per parameter
        norms = torch._foreach_norm([p.grad.detach() for p in params])
        return float(torch.linalg.vector_norm(torch.stack(norms)))
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    return float(norm)


def minimize_step(
    optimizer: torch.optim.Optimizer, loss: torch.Tensor, max_grad_norm: float | None
) -> float:
    """One step of ``optimizer`` down ``loss``, its gradients clipped to ``max_grad_norm``.

    The optimizer's gradients are cleared first, so gradients that another loss left on
    its parameters do not count.

    Returns:
        The global gradient norm before clipping (see :func:`clip_gradients`).
    """
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = clip_gradients(
        [p for group in optimizer.param_groups for p in group["params"]], max_grad_norm
    )
    optimizer.step()
    return norm
