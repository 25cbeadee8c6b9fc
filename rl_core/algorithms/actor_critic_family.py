"""The off-policy actor-critic family: SAC, CrossQ, RLPD and IQL as registered algorithm specs.

SAC, CrossQ and RLPD train a squashed-Gaussian actor and an ensemble of Q critics from a
replay buffer with an entropy bonus whose weight (alpha) is tuned towards a target
entropy. They differ in how the critics are built and how the TD target is formed, which a
spec states and :class:`rl_core.training.sac_update.SACLearner` reads:

- ``sac`` (Haarnoja et al., 2018): target critics updated by Polyak averaging, the TD
  target takes the smallest Q of the target ensemble.
- ``crossq`` (Bhatt et al., 2024): no target networks; batch-renormalized critics see the
  current and next state-action pairs in one forward pass, so both share batch statistics.
- ``rlpd`` (Ball et al., 2023): LayerNorm critic ensemble (10 by default) whose TD target is
  the minimum over a random subset, symmetric sampling (half offline data, half online
  replay) and a high update-to-data ratio.

- ``iql`` (Kostrikov et al., 2021): offline RL from a demonstration dataset alone (no env
  steps for training): expectile regression of a state value, critics towards
  ``r + γ V(s')``, an advantage-weighted behaviour-cloning actor
  (:mod:`rl_core.algorithms.iql`, :class:`rl_core.training.iql_update.IQLLearner`).

Select one with ``algorithm.loss_type``; a spec names the learner that trains it and the
model features it needs, and the config checks them before any worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rl_core.registry import Registry


@dataclass(frozen=True)
class ActorCriticSpec:
    """How one off-policy algorithm builds its TD target and what it needs.

    Attributes:
        target_networks: Keep Polyak-averaged target critics for the TD target.
        joint_critic_forward: Evaluate current and next pairs in one critic forward pass
            (CrossQ; the next pair's values are not differentiated).
        critic_norm: The ``model.critic_norm`` the algorithm requires (None: any).
        needs_offline_data: Samples half of each minibatch from ``replay.offline_data``.
        actor_q: How the actor loss reduces the ensemble: ``min`` or ``mean``.
        offline: Trains from the demonstration dataset (``demos.path``) alone: no env steps
            for training, no replay buffer; evaluation plays episodes as usual.
        learner: The learner that runs its updates (a name in
            :data:`rl_core.training.off_policy_learners.OFF_POLICY_LEARNERS`).
        model: The built-in model it trains (named in config errors).
        model_forwards: The forward types the model must offer (its builder's
            ``forward_types``).
    """

    target_networks: bool = True
    joint_critic_forward: bool = False
    critic_norm: str | None = None
    needs_offline_data: bool = False
    actor_q: str = "min"
    offline: bool = False
    learner: str = "sac"
    model: str = "mlp_sac"
    model_forwards: tuple[str, ...] = ("sac_forward", "q_forward")


ACTOR_CRITIC_ALGORITHMS: Registry[ActorCriticSpec] = Registry("off-policy algorithm")


def register_actor_critic(name: str, spec: ActorCriticSpec, *, force: bool = False) -> None:
    """Register an off-policy algorithm spec under ``name`` (used as ``algorithm.loss_type``)."""
    ACTOR_CRITIC_ALGORITHMS.register(name, spec, force=force)


def actor_critic_spec(loss_type: str) -> ActorCriticSpec | None:
    """The spec of ``loss_type`` when it names an off-policy algorithm, else None."""
    if loss_type not in ACTOR_CRITIC_ALGORITHMS:
        return None
    return ACTOR_CRITIC_ALGORITHMS.get(loss_type)


register_actor_critic("sac", ActorCriticSpec())
register_actor_critic(
    "crossq",
    ActorCriticSpec(target_networks=False, joint_critic_forward=True, critic_norm="batch_renorm"),
)
register_actor_critic(
    "rlpd", ActorCriticSpec(critic_norm="layer_norm", needs_offline_data=True, actor_q="mean")
)
register_actor_critic(
    "iql",
    ActorCriticSpec(
        offline=True,
        learner="iql",
        model="mlp_iql",
        model_forwards=("default_forward", "q_forward", "v_forward"),
    ),
)


def algorithms_training(model_type: str) -> list[str]:
    """The registered off-policy algorithms whose built-in model is ``model_type``."""
    return [
        name
        for name in ACTOR_CRITIC_ALGORITHMS.names()
        if ACTOR_CRITIC_ALGORITHMS.get(name).model == model_type
    ]
