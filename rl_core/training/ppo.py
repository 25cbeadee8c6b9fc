"""Advantage computation and the clipped-surrogate update on a rollout batch."""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import torch

from rl_core.algorithms import (
    compute_value_loss,
    get_advantage,
    get_policy_loss,
    kl_penalty,
    normalize_advantages,
)
from rl_core.data.batch import to_torch_tree
from rl_core.models.base_policy import BasePolicy, policy_device
from rl_core.training.nonfinite import SkippedUpdateGuard
from rl_core.training.optim import clip_gradients


@torch.no_grad()
def compute_advantages(
    policy: BasePolicy, batch: dict[str, Any], algo: Any, group_size: int = 1
) -> dict[str, Any]:
    """Add ``advantages`` and ``returns`` [T, N] tensors to ``batch`` (in place).

    ``group_size``: consecutive envs that share their reset seed (``env.group_size``), for
    the estimators that compare episodes within groups (``episode_grpo``).

    Values of observations after truncation and after the last step are computed by the
    current policy's critic (weights equal the rollout's at this point). The batch's
    arrays go to the policy's device; so do the advantages and returns.
    """
    device = policy_device(policy)
    rewards = torch.tensor(batch["rewards"], device=device)
    values = torch.tensor(batch["prev_values"], device=device)
    final_values = torch.zeros_like(rewards)
    if len(batch["trunc_index"]):
        idx = torch.as_tensor(batch["trunc_index"], device=device)
        trunc_v = policy.forward("value_forward", env_obs=to_torch_tree(batch["trunc_obs"]))
        final_values[idx[:, 0], idx[:, 1]] = trunc_v.float()
    next_values = policy.forward("value_forward", env_obs=to_torch_tree(batch["next_obs"])).float()
    estimator = get_advantage(algo.adv_type)
    advantages, returns = estimator(
        rewards=rewards,
        values=values,
        terminated=torch.tensor(batch["terminated"], device=device),
        truncated=torch.tensor(batch["truncated"], device=device),
        next_values=next_values,
        final_values=final_values,
        gamma=algo.gamma,
        gae_lambda=algo.gae_lambda,
        group_size=group_size,
    )
    batch["advantages"], batch["returns"] = advantages, returns
    return {
        "train/advantage_mean": float(advantages.mean()),
        "train/return_target_mean": float(returns.mean()),
    }


def _flatten(tree: Any, n: int, device: torch.device) -> Any:
    """``[T, N, ...]`` arrays or tensors (nested in dicts) as ``[T*N, ...]`` tensors on ``device``."""
    if isinstance(tree, dict):
        return {k: _flatten(v, n, device) for k, v in tree.items()}
    t = tree if isinstance(tree, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(tree))
    return t.reshape(n, *t.shape[2:]).to(device)


def _index(tree: Any, idx: torch.Tensor) -> Any:
    if isinstance(tree, dict):
        return {k: _index(v, idx) for k, v in tree.items()}
    return tree[idx]


def ppo_update(
    policy: BasePolicy,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, Any],
    algo: Any,
    actor: Any,
    generator: torch.Generator,
    *,
    guard: SkippedUpdateGuard | None = None,
    iteration: int | None = None,
) -> dict[str, float]:
    """Run ``actor.update_epochs`` epochs of minibatch updates on ``batch``.

    A minibatch whose loss or gradient norm is not finite is skipped: its gradients are
    dropped and ``optimizer.step()`` is not called, so weights and optimizer state stay as
    they were. It counts in ``train/skipped_updates`` and not in the other metrics.

    Args:
        policy: The policy being trained.
        optimizer: Its optimizer (learning rate already set for this iteration).
        batch: Rollout batch with ``advantages`` and ``returns`` (see
            :func:`compute_advantages`); numpy arrays or tensors, moved to the policy's
            device.
        algo: The ``algorithm`` config section.
        actor: The ``actor`` config section.
        generator: Drives minibatch shuffling (checkpointed for exact resume); a CPU
            generator, whatever the policy's device.
        guard: Tracks skipped updates across calls (default: a new one from
            ``actor.max_skipped_updates_in_a_row``).
        iteration: Training iteration, named in the messages about skipped updates.

    Returns:
        Mean metrics over the applied minibatch updates, under ``train/``, with
        ``train/minibatch_updates`` (applied) and ``train/skipped_updates``.

    Raises:
        SkippedUpdatesError: ``actor.max_skipped_updates_in_a_row`` updates in a row were
            skipped.
    """
    t, n_env = batch["rewards"].shape
    n = t * n_env
    device = policy_device(policy)
    flat = {
        "forward_inputs": _flatten(batch["forward_inputs"], n, device),
        "old_logprobs": _flatten(batch["prev_logprobs"], n, device).float(),
        "old_values": _flatten(batch["prev_values"], n, device).float(),
        "advantages": _flatten(batch["advantages"], n, device).float(),
        "returns": _flatten(batch["returns"], n, device).float(),
    }
    loss_fn = get_policy_loss(algo.loss_type)
    if takes_behaviour_logprobs(loss_fn):
        # decoupled PPO: clip against the weights before this update (the proximal policy)
        # and weight by proximal / behaviour (the weights the actions were sampled with)
        flat["behaviour_logprobs"] = flat["old_logprobs"]
        flat["old_logprobs"] = _proximal_logprobs(policy, flat["forward_inputs"])
    mb_size = n // actor.num_minibatches
    if guard is None:
        guard = SkippedUpdateGuard(actor.max_skipped_updates_in_a_row)
    sums: dict[str, float] = {}
    count = skipped = 0
    stop = False
    for epoch in range(actor.update_epochs):
        # drawn on the generator's device (the CPU): the same order wherever the policy runs
        perm = torch.randperm(n, generator=generator).to(device)
        for start in range(0, n, mb_size):
            mb = _index(flat, perm[start : start + mb_size])
            out = policy.forward("default_forward", forward_inputs=mb["forward_inputs"])
            adv = mb["advantages"]
            if algo.normalize_advantages:
                adv = normalize_advantages(adv)
            pg_loss, pg_metrics = loss_fn(
                logprobs=out["logprobs"],
                old_logprobs=mb["old_logprobs"],
                advantages=adv,
                clip_ratio_low=algo.clip_ratio_low,
                clip_ratio_high=algo.clip_ratio_high,
                clip_ratio_c=algo.clip_ratio_c,
                behaviour_logprobs=mb.get("behaviour_logprobs"),
                behaviour_weight_cap=algo.behaviour_weight_cap,
            )
            v_loss, v_metrics = compute_value_loss(
                out["values"], mb["old_values"], mb["returns"], value_clip=algo.value_clip
            )
            entropy = out["entropy"].mean()
            loss = pg_loss + algo.value_coef * v_loss - algo.entropy_coef * entropy
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = clip_gradients(policy.parameters(), actor.max_grad_norm)
            finite = math.isfinite(loss.item()) and math.isfinite(grad_norm)
            where = f"epoch {epoch + 1}, minibatch {start // mb_size + 1}"
            if not guard.allow_step(finite, iteration, optimizer.param_groups[0]["lr"], where):
                optimizer.zero_grad(set_to_none=True)
                skipped += 1
                continue
            optimizer.step()
            with torch.no_grad():
                kl = kl_penalty(out["logprobs"], mb["old_logprobs"], algo.kl_estimator).mean()
            step_metrics = {
                "policy_loss": pg_loss.item(),
                "value_loss": v_loss.item(),
                "entropy": entropy.item(),
                "kl": float(kl),
                "grad_norm": grad_norm,
                **{k: float(v) for k, v in pg_metrics.items()},
                **{k: float(v) for k, v in v_metrics.items()},
            }
            for k, v in step_metrics.items():
                sums[k] = sums.get(k, 0.0) + v
            count += 1
            if algo.target_kl is not None and float(kl) > algo.target_kl:
                stop = True
        if stop:
            break
    metrics = {f"train/{k}": v / count for k, v in sums.items()}
    metrics["train/minibatch_updates"] = float(count)
    metrics["train/skipped_updates"] = float(skipped)
    return metrics


def takes_behaviour_logprobs(loss_fn: Any) -> bool:
    """Whether a registered policy loss weights samples by their behaviour log-probs."""
    return "behaviour_logprobs" in inspect.signature(loss_fn).parameters


@torch.no_grad()
def _proximal_logprobs(policy: BasePolicy, forward_inputs: Any) -> torch.Tensor:
    """Log-probs of the batch's actions under the policy's current weights."""
    return policy.forward("default_forward", forward_inputs=forward_inputs)["logprobs"].float()
