"""Gradient updates of the off-policy actor-critic family (SAC, CrossQ, RLPD).

:class:`SACLearner` owns what the updates change besides the policy's weights: the target
critics (when the algorithm keeps them), the entropy temperature ``log_alpha``, three
optimizers (actor, critics, temperature; :func:`~rl_core.training.optim.build_optimizer`
from the ``actor`` section), the noise generator and the update counter.
Everything is plain torch, so the whole state round-trips through a checkpoint and an
interrupted run continues bit for bit.

The learner works on the policy's device: the temperature lives there, minibatches are
moved there (:func:`minibatches_from_arrays`), while the noise generator stays a CPU
generator (draws are moved), so updates draw the same numbers wherever the policy runs.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.actor_critic_family import ActorCriticSpec
from rl_core.algorithms.target_networks import polyak_update
from rl_core.data.replay_buffer import TRANSITION_KEYS
from rl_core.models.base_policy import policy_device
from rl_core.training.optim import (
    OFF_POLICY_ADAM_EPS,
    build_optimizer,
    learning_rate,
    minimize_step,
    set_learning_rate,
)
from rl_core.training.step_metrics import mean_step_metrics


class SACLearner:
    """Updates an ``mlp_sac``-style policy (``sac_forward`` / ``q_forward``) from minibatches.

    Args:
        policy: The policy, already on its device (the optimizers and the temperature are
            made there); it must offer ``sac_forward``, ``q_forward``,
            ``actor_parameters()`` and ``critic_parameters()``.
        spec: The algorithm's spec (target networks, joint critic forward, ensemble use).
        settings: ``algorithm.off_policy`` (tau, temperature, critic subset, delays, lrs).
        actor: The ``actor`` section: ``optimizer``, ``lr`` (the actor's; the critics' and
            the temperature's unless ``settings`` sets theirs), ``lr_schedule`` and
            ``warmup_iterations`` (all three rates follow them), ``weight_decay`` (actor and
            critics; the temperature gets none), ``adam_eps`` (None: torch's 1e-8) and
            ``max_grad_norm`` (clip each network's gradient norm; None: no clipping).
        gamma: Discount factor.
        seed: Seed of the noise generator (actions sampled inside the losses).
    """

    def __init__(
        self,
        policy: nn.Module,
        spec: ActorCriticSpec,
        settings: Any,
        actor: Any,
        gamma: float,
        seed: int,
    ) -> None:
        self.policy, self.spec, self.settings, self.actor = policy, spec, settings, actor
        self.gamma, self.max_grad_norm = gamma, actor.max_grad_norm
        #: Peak learning rate of each optimizer (the schedule scales them alike).
        self.base_lrs = {
            "actor": actor.lr,
            "critic": settings.critic_lr or actor.lr,
            "alpha": settings.alpha_lr or actor.lr,
        }
        # fused: one kernel per step instead of a loop over parameters (CPU and CUDA)
        options: dict[str, Any] = {
            "betas": (settings.adam_beta1, 0.999),
            "default_eps": OFF_POLICY_ADAM_EPS,
            "fused": True,
        }
        self.actor_optimizer = build_optimizer(
            policy.actor_parameters(), actor, lr=self.base_lrs["actor"], **options
        )
        self.critic_optimizer = build_optimizer(
            policy.critic_parameters(), actor, lr=self.base_lrs["critic"], **options
        )
        self.log_alpha = torch.tensor(
            math.log(settings.init_alpha), device=policy_device(policy), requires_grad=True
        )
        # no weight decay on the temperature: it would pull alpha towards 1
        self.alpha_optimizer = build_optimizer(
            [self.log_alpha], actor, lr=self.base_lrs["alpha"], weight_decay=0.0, **options
        )
        action_dim = int(policy.action_dim)
        target = settings.target_entropy
        self.target_entropy = float(-action_dim if target is None else target)
        self.target_critics = (
            copy.deepcopy(policy.critics).requires_grad_(False) if spec.target_networks else None
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0

    def set_learning_rates(self, iteration: int, max_iterations: int) -> float:
        """Set the three optimizers' rates for ``iteration`` under ``actor.lr_schedule``.

        Args:
            iteration: Current iteration (0-based).
            max_iterations: Iterations of the run (``run.max_iterations``).

        Returns:
            The actor's learning rate.
        """
        optimizers = {
            "actor": self.actor_optimizer,
            "critic": self.critic_optimizer,
            "alpha": self.alpha_optimizer,
        }
        rates = {}
        for name, optimizer in optimizers.items():
            rates[name] = learning_rate(self.actor, iteration, max_iterations, self.base_lrs[name])
            set_learning_rate(optimizer, rates[name])
        return rates["actor"]

    # -- one gradient step ---------------------------------------------------------------
    def _td_target(self, batch: dict[str, torch.Tensor], alpha: torch.Tensor) -> tuple:
        """Critic predictions ``[E, B]`` and their TD targets ``[B]``."""
        policy, spec = self.policy, self.spec
        with torch.no_grad():
            following = policy.sac_forward(batch["next_states"], generator=self.generator)
        if spec.joint_critic_forward:  # CrossQ: one pass, shared batch statistics
            both = policy.q_forward(
                torch.cat([batch["states"], batch["next_states"]]),
                torch.cat([batch["actions"], following["actions"]]),
            )
            rows = batch["states"].shape[0]
            q, q_next = both[:, :rows], both[:, rows:].detach()
        else:
            q = policy.q_forward(batch["states"], batch["actions"])
            with torch.no_grad():
                q_next = policy.q_forward(
                    batch["next_states"], following["actions"], critics=self.target_critics
                )
        subset = self.settings.critic_subset
        if subset is not None and subset < q_next.shape[0]:  # RLPD: min over a random subset
            pick = torch.randperm(q_next.shape[0], generator=self.generator)[:subset]
            q_next = q_next[pick.to(q_next.device)]
        with torch.no_grad():
            soft_value = q_next.min(dim=0).values - alpha * following["logprobs"]
            target = batch["rewards"] + self.gamma * (1.0 - batch["terminated"]) * soft_value
        return q, target

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> float:
        return minimize_step(optimizer, loss, self.max_grad_norm)

    def update_once(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic step on one minibatch (and an actor and temperature step when due).

        The actor and the temperature step every ``actor_update_interval`` critic steps.

        Returns:
            Metrics of this step (actor and temperature ones only when they stepped).
        """
        policy, settings = self.policy, self.settings
        alpha = self.log_alpha.detach().exp()
        q, target = self._td_target(batch, alpha)
        critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()
        metrics = {
            "train/critic_loss": float(critic_loss.detach()),
            "train/critic_grad_norm": self._step(self.critic_optimizer, critic_loss),
            "train/q_mean": float(q.detach().mean()),
        }
        if self.target_critics is not None:
            polyak_update(self.target_critics, policy.critics, settings.tau)
        self.updates += 1
        if self.updates % settings.actor_update_interval == 0:
            metrics.update(self._actor_step(batch["states"], alpha))
        return metrics

    def _actor_step(self, states: torch.Tensor, alpha: torch.Tensor) -> dict[str, float]:
        policy = self.policy
        sampled = policy.sac_forward(states, generator=self.generator)
        # the critics only pass gradients to the actions (no weight gradients to compute);
        # CrossQ: the actor sees the critics' running statistics
        policy.critics.eval().requires_grad_(False)
        q_pi = policy.q_forward(states, sampled["actions"])
        policy.critics.train().requires_grad_(True)
        q_pi = q_pi.min(dim=0).values if self.spec.actor_q == "min" else q_pi.mean(dim=0)
        actor_loss = (alpha * sampled["logprobs"] - q_pi).mean()
        metrics = {
            "train/actor_loss": float(actor_loss.detach()),
            "train/actor_grad_norm": self._step(self.actor_optimizer, actor_loss),
            "train/entropy": float(-sampled["logprobs"].detach().mean()),
        }
        if self.settings.autotune_alpha:
            gap = (sampled["logprobs"].detach() + self.target_entropy).mean()
            alpha_loss = -self.log_alpha * gap
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()
            metrics["train/alpha_loss"] = float(alpha_loss.detach())
        return metrics

    def update(self, minibatches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        """Run :meth:`update_once` on each minibatch; metrics averaged over the steps.

        Minibatches are tensors on the policy's device (:func:`minibatches_from_arrays`
        puts them there).

        The critics' gradients from the actor loss are dropped before the next critic step
        (each optimizer clears its own gradients first).
        """
        self.policy.train()
        metrics = mean_step_metrics(self.update_once, minibatches)
        metrics["train/alpha"] = float(self.log_alpha.detach().exp())
        return metrics

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything besides the policy weights that the updates change."""
        return {
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "target_critics": (
                None if self.target_critics is None else self.target_critics.state_dict()
            ),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.target_critics is not None:
            self.target_critics.load_state_dict(state["target_critics"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])


def minibatches_from_arrays(
    arrays: dict[str, Any], count: int, device: torch.device | None = None
) -> list[dict[str, torch.Tensor]]:
    """Split sampled rows ``[count * B, ...]`` into ``count`` minibatches of tensors.

    Args:
        arrays: Sampled transitions (numpy, as the replay worker sends them).
        count: Number of minibatches.
        device: Where the minibatches go (the policy's device; None: the CPU). Each array
            moves in one copy before it is split.
    """
    # arrays from Ray's object store are read-only: torch gets writable copies of those
    tensors = {
        k: torch.from_numpy(np.require(arrays[k], requirements="W")).to(device)
        for k in TRANSITION_KEYS
    }
    rows = tensors["rewards"].shape[0] // count
    return [{k: v[i * rows : (i + 1) * rows] for k, v in tensors.items()} for i in range(count)]
