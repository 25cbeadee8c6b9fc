"""Per-element KL estimators between the current policy and a reference policy.

Schulman's estimators of ``KL(pi || pi_ref)`` from samples of ``pi``
(http://joschu.net/blog/kl-approx.html), with ``logr = ref_logprobs - logprobs``:

* ``k1``: ``-logr`` (unbiased, high variance, can be negative)
* ``k2``: ``0.5 * logr^2`` (biased, low variance)
* ``k3``: ``exp(logr) - logr - 1`` (unbiased, low variance, always >= 0)
* ``low_var_kl``: ``k3`` with ``logr`` clamped to ``[-20, 20]`` and the result clamped to
  ``[-10, 10]`` (the verl/GRPO convention).

Each has a straight-through variant with a ``+`` suffix (``k1+``, ``k3+``, ...; verl's
convention): the value of the estimator in the forward pass, the gradient of ``k2`` in the
backward pass. ``k2``'s gradient, ``(logp - logp_ref) * grad(logp)``, is an unbiased
gradient of the KL when it is used as a loss term, which ``k1``'s and ``k3``'s are not.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_core.registry import Registry, RegistryError

KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

KL_ESTIMATORS: Registry[KLEstimator] = Registry("KL estimator")


@KL_ESTIMATORS.decorator("k1")
def _k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    return logprobs - ref_logprobs


@KL_ESTIMATORS.decorator("k2")
def _k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.decorator("k3")
def _k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    log_ratio = ref_logprobs - logprobs
    return torch.exp(log_ratio) - log_ratio - 1.0


@KL_ESTIMATORS.decorator("low_var_kl")
def _low_var_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    log_ratio = torch.clamp(ref_logprobs - logprobs, -20.0, 20.0)
    kl = torch.exp(log_ratio) - log_ratio - 1.0
    return torch.clamp(kl, -10.0, 10.0)


def _straight_through(base: KLEstimator) -> KLEstimator:
    def estimator(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
        value = base(logprobs, ref_logprobs)
        grad_path = 0.5 * (logprobs - ref_logprobs) ** 2
        return value.detach() + grad_path - grad_path.detach()

    return estimator


for _name, _base in (("k1", _k1), ("k2", _k2), ("k3", _k3), ("low_var_kl", _low_var_kl)):
    KL_ESTIMATORS.register(f"{_name}+", _straight_through(_base))


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-element estimate of ``KL(pi || pi_ref)`` from log-probs of sampled actions/tokens.

    Args:
        logprobs: Log-probabilities under the current policy ``pi``.
        ref_logprobs: Log-probabilities of the same samples under the reference policy.
        estimator: One of ``KL_ESTIMATORS.names()``: ``"k1"``, ``"k2"``, ``"k3"``,
            ``"low_var_kl"`` or one of them with a ``+`` (case-insensitive).

    Returns:
        Tensor shaped like ``logprobs`` (differentiable w.r.t. ``logprobs``); reduce it with
        a masked mean.

    Raises:
        ValueError: Unknown estimator; the message lists the allowed names.
    """
    try:
        fn = KL_ESTIMATORS.get(estimator)
    except RegistryError:
        raise ValueError(
            f"unknown KL estimator {estimator!r}; allowed: {', '.join(KL_ESTIMATORS.names())}"
        ) from None
    return fn(logprobs, ref_logprobs)
