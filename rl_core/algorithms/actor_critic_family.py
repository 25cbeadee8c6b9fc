"""The off-policy actor-critic family: SAC, CrossQ and RLPD as registered algorithm specs.

All three train a squashed-Gaussian actor and an ensemble of Q critics from a replay buffer
with an entropy bonus whose weight (alpha) is tuned towards a target entropy. They differ
in how the critics are built and how the TD target is formed, which a spec states and
:class:`rl_core.training.sac_update.SACLearner` reads:

- ``sac`` (Haarnoja et al., 2018): target critics updated by Polyak averaging, the TD
  target takes the smallest Q of the target ensemble.
- ``crossq`` (Bhatt et al., 2024): no target networks; batch-renormalized critics see the
  current and next state-action pairs in one forward pass, so both share batch statistics.
- ``rlpd`` (Ball et al., 2023): LayerNorm critic ensemble (10 by default) whose TD target is
  the minimum over a random subset, symmetric sampling (half offline data, half online
  replay) and a high update-to-data ratio.

Select one with ``algorithm.loss_type``; a spec names the model features it needs, and the
config checks them before any worker starts.
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
    """

    target_networks: bool = True
    joint_critic_forward: bool = False
    critic_norm: str | None = None
    needs_offline_data: bool = False
    actor_q: str = "min"


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
