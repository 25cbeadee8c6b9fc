"""Gradient updates of Implicit Q-Learning (IQL), offline RL from a fixed dataset.

:class:`IQLLearner` owns what the updates change besides the policy's weights: the target
critics, three optimizers (actor, Q critics, state value ``V``;
:func:`~rl_core.training.optim.build_optimizer` from the ``actor`` section), the generator
that draws minibatch rows from the dataset, and the update counter. Everything is plain
torch, so the whole state round-trips through a checkpoint and an interrupted run draws the
same rows and continues bit for bit.

One gradient step on a minibatch follows the reference implementation's order
(:mod:`rl_core.algorithms.iql` has the losses):

1. ``V`` takes a step of expectile regression towards ``min_i Q̂_i(s, a)`` (target critics);
2. the actor takes a step of advantage-weighted regression, with weights
   ``min(exp(β (Q̂ - V)), max_weight)`` from the updated ``V`` (every
   ``algorithm.off_policy.actor_update_interval`` steps);
3. the Q critics take a step towards ``r + γ (1 - d) V(s')``;
4. the target critics move towards the critics by Polyak averaging
   (``algorithm.off_policy.tau``).

The policy (``mlp_iql``) must offer ``q_forward``, ``v_forward``, ``demo_forward_inputs``
(the actor's log-probabilities of dataset actions come from its ``default_forward``, as in
behaviour cloning), ``actor_parameters()``, ``critic_parameters()`` and
``value_parameters()``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.actor_critic_family import ActorCriticSpec
from rl_core.algorithms.iql import (
    awr_actor_loss,
    awr_weights,
    iql_q_loss,
    iql_td_target,
    iql_value_loss,
)
from rl_core.algorithms.target_networks import polyak_update
from rl_core.data.replay_buffer import TRANSITION_KEYS
from rl_core.training.optim import (
    OFF_POLICY_ADAM_EPS,
    build_optimizer,
    learning_rate,
    minimize_step,
    set_learning_rate,
)
from rl_core.training.step_metrics import mean_step_metrics


class IQLLearner:
    """Updates an ``mlp_iql``-style policy from minibatches of dataset transitions.

    Args:
        policy: The policy, already on its device (the optimizers are made there).
        spec: The algorithm's spec (kept for a common signature with the other learners).
        settings: ``algorithm.off_policy``: ``tau``, ``actor_update_interval``,
            ``critic_lr`` (the Q critics' and ``V``'s; None: ``actor.lr``) and
            ``adam_beta1``.
        iql: ``algorithm.iql``: ``expectile``, ``temperature`` and ``max_weight``.
        actor: The ``actor`` section: ``optimizer``, ``lr``, ``lr_schedule``,
            ``warmup_iterations``, ``weight_decay``, ``adam_eps`` and ``max_grad_norm``
            (each network's gradient norm; None: no clipping).
        gamma: Discount factor.
        seed: Seed of the generator that draws minibatch rows.
    """

    def __init__(
        self,
        policy: nn.Module,
        spec: ActorCriticSpec,
        settings: Any,
        iql: Any,
        actor: Any,
        gamma: float,
        seed: int,
    ) -> None:
        self.policy, self.spec, self.settings, self.iql, self.actor = (
            policy,
            spec,
            settings,
            iql,
            actor,
        )
        self.gamma, self.max_grad_norm = gamma, actor.max_grad_norm
        critic_lr = settings.critic_lr or actor.lr
        #: Peak learning rate of each optimizer (the schedule scales them alike).
        self.base_lrs = {"actor": actor.lr, "critic": critic_lr, "value": critic_lr}
        options: dict[str, Any] = {
            "betas": (settings.adam_beta1, 0.999),
            "default_eps": OFF_POLICY_ADAM_EPS,
            "fused": True,
        }
        self.optimizers = {
            "actor": build_optimizer(
                policy.actor_parameters(), actor, lr=self.base_lrs["actor"], **options
            ),
            "critic": build_optimizer(
                policy.critic_parameters(), actor, lr=self.base_lrs["critic"], **options
            ),
            "value": build_optimizer(
                policy.value_parameters(), actor, lr=self.base_lrs["value"], **options
            ),
        }
        self.target_critics = copy.deepcopy(policy.critics).requires_grad_(False)
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0

    def set_learning_rates(self, iteration: int, max_iterations: int) -> float:
        """Set the three optimizers' rates for ``iteration`` under ``actor.lr_schedule``.

        Returns:
            The actor's learning rate.
        """
        rates = {}
        for name, optimizer in self.optimizers.items():
            rates[name] = learning_rate(self.actor, iteration, max_iterations, self.base_lrs[name])
            set_learning_rate(optimizer, rates[name])
        return rates["actor"]

    # -- minibatches ---------------------------------------------------------------------
    def draw_minibatches(
        self, data: dict[str, torch.Tensor], count: int, batch_size: int
    ) -> list[dict[str, torch.Tensor]]:
        """``count`` minibatches of ``batch_size`` rows drawn uniformly (with replacement).

        The rows are drawn with the learner's CPU generator (saved in its state), so they
        are the same on any device and after a resume.

        Args:
            data: The dataset's :data:`~rl_core.data.replay_buffer.TRANSITION_KEYS` tensors,
                one row per transition (on the policy's device).
            count: Number of minibatches.
            batch_size: Rows per minibatch.
        """
        total = int(data["rewards"].shape[0])
        rows = torch.randint(0, total, (count * batch_size,), generator=self.generator)
        rows = rows.to(data["rewards"].device)
        picked = {k: data[k][rows] for k in TRANSITION_KEYS}
        return [
            {k: v[i * batch_size : (i + 1) * batch_size] for k, v in picked.items()}
            for i in range(count)
        ]

    # -- one gradient step ---------------------------------------------------------------
    def _step(self, name: str, loss: torch.Tensor) -> float:
        return minimize_step(self.optimizers[name], loss, self.max_grad_norm)

    def update_once(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One step of ``V``, the actor (when due), the Q critics and the target critics.

        Returns:
            Metrics of this step (actor ones only when the actor stepped).
        """
        policy, iql = self.policy, self.iql
        states, actions = batch["states"], batch["actions"]
        with torch.no_grad():
            target_q = policy.q_forward(states, actions, critics=self.target_critics)
            smallest_q = target_q.min(dim=0).values
        values = policy.v_forward(states)
        value_loss = iql_value_loss(target_q, values, iql.expectile)
        metrics = {
            "train/value_loss": float(value_loss.detach()),
            "train/value_grad_norm": self._step("value", value_loss),
            "train/v_mean": float(values.detach().mean()),
        }
        self.updates += 1
        if self.updates % self.settings.actor_update_interval == 0:
            metrics.update(self._actor_step(states, actions, smallest_q))
        with torch.no_grad():
            next_values = policy.v_forward(batch["next_states"])
        target = iql_td_target(batch["rewards"], batch["terminated"], next_values, self.gamma)
        q = policy.q_forward(states, actions)
        critic_loss = iql_q_loss(q, target)
        metrics["train/critic_loss"] = float(critic_loss.detach())
        metrics["train/critic_grad_norm"] = self._step("critic", critic_loss)
        metrics["train/q_mean"] = float(q.detach().mean())
        polyak_update(self.target_critics, policy.critics, self.settings.tau)
        return metrics

    def _actor_step(
        self, states: torch.Tensor, actions: torch.Tensor, smallest_q: torch.Tensor
    ) -> dict[str, float]:
        policy, iql = self.policy, self.iql
        with torch.no_grad():
            advantages = smallest_q - policy.v_forward(states)
        weights = awr_weights(advantages, iql.temperature, iql.max_weight)
        inputs = policy.demo_forward_inputs({"states": states}, actions)
        out = policy.default_forward(inputs, compute_values=False, compute_entropy=True)
        logprobs = out["logprobs"].float()
        actor_loss = awr_actor_loss(logprobs, weights)
        return {
            "train/actor_loss": float(actor_loss.detach()),
            "train/actor_grad_norm": self._step("actor", actor_loss),
            "train/bc_loss": float(-logprobs.detach().mean()),
            "train/entropy": float(out["entropy"].detach().mean()),
            "train/advantage_mean": float(advantages.mean()),
            "train/awr_weight_mean": float(weights.mean()),
            "train/awr_clipped_fraction": float((weights >= iql.max_weight).float().mean()),
        }

    def update(self, minibatches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        """Run :meth:`update_once` on each minibatch; metrics averaged over the steps."""
        self.policy.train()
        return mean_step_metrics(self.update_once, minibatches)

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything besides the policy weights that the updates change."""
        return {
            **{f"{name}_optimizer": o.state_dict() for name, o in self.optimizers.items()},
            "target_critics": self.target_critics.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state[f"{name}_optimizer"])
        self.target_critics.load_state_dict(state["target_critics"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])


def dataset_tensors(
    transitions: dict[str, np.ndarray], device: torch.device | None = None
) -> dict[str, torch.Tensor]:
    """A dataset's transitions as float32 tensors on ``device`` (the policy's), once."""
    return {
        k: torch.from_numpy(np.ascontiguousarray(transitions[k], dtype=np.float32)).to(device)
        for k in TRANSITION_KEYS
    }
