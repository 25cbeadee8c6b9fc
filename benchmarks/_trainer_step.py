"""The trainer's two passes over one batch, timed: log-probs, then one update.

Exactly what a trainer rank runs in the advantage and update steps, in this process: the
log-prob pass (:func:`infra.llm.workers.llm_workers.forward_in_micro_batches`) and
one optimizer step over the batch (:func:`rl_core.training.llm_update.accumulate_minibatch`
then the clipped step), cut into micro-batches by a :class:`MicroBatching`. No Ray,
Prefect or MLflow: the bare trainer, for packed-against-padded comparisons.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import torch

from infra.llm.workers.llm_workers import forward_in_micro_batches
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.training.llm_update import accumulate_minibatch, minibatch_totals
from rl_core.training.micro_batches import MicroBatching
from rl_core.training.optim import clip_gradients


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so the clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def logprob_pass(
    policy: CausalLMPolicy, batch: dict[str, torch.Tensor], batching: MicroBatching
) -> tuple[float, torch.Tensor]:
    """Seconds of the trainer's log-prob pass, and the log-probs ``[N, R]``."""
    device = batch["response_ids"].device
    policy.eval()
    sync(device)
    start = time.perf_counter()
    out = forward_in_micro_batches(policy, batch, batching, 1.0, values=False)
    sync(device)
    return time.perf_counter() - start, torch.from_numpy(out["logprobs"])


def update_pass(
    policy: CausalLMPolicy,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    batching: MicroBatching,
    algo: Any,
    max_grad_norm: float = 1.0,
) -> float:
    """Seconds of one optimizer step over ``batch`` (forward, backward, clip, step)."""
    device = batch["response_ids"].device
    (totals,) = minibatch_totals([batch], 1)
    policy.train()
    sync(device)
    start = time.perf_counter()
    accumulate_minibatch(policy, batch, totals, algo, batching)
    clip_gradients(policy.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    sync(device)
    return time.perf_counter() - start


def trainer_step(
    policy: CausalLMPolicy,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    batching: MicroBatching,
    algo: Any,
) -> dict[str, float]:
    """One log-prob pass and one update on ``batch``: their seconds.

    The log-probs become the batch's ``old_logprobs`` (as the advantage step makes them).
    """
    logprob_s, old = logprob_pass(policy, batch, batching)
    batch = {**batch, "old_logprobs": old.to(batch["response_ids"].device)}
    update_s = update_pass(policy, optimizer, batch, batching, algo)
    return {"logprob_s": logprob_s, "update_s": update_s, "step_s": logprob_s + update_s}


def timed_steps(
    model: torch.nn.Module,
    tokenizer: Any,
    batch: dict[str, torch.Tensor],
    batching: MicroBatching,
    algo: Any,
    repeats: int,
) -> list[dict[str, float]]:
    """``repeats`` timed :func:`trainer_step` s after a warm-up one, on a copy of ``model``.

    The copy (and its optimizer) is freed afterwards, so sides can run one after another
    on one GPU.
    """
    policy = CausalLMPolicy(copy.deepcopy(model), tokenizer)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    try:
        steps = [trainer_step(policy, optimizer, batch, batching, algo) for _ in range(repeats + 1)]
    finally:
        del policy, optimizer
        if batch["response_ids"].device.type == "cuda":
            torch.cuda.empty_cache()
    return steps[1:]
