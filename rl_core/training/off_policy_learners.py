"""The learners of the off-policy family, by the name an algorithm's spec gives.

An :class:`~rl_core.algorithms.actor_critic_family.ActorCriticSpec` names its learner
(``spec.learner``); the trainer builds it with :func:`build_learner`. A learner offers
``set_learning_rates(iteration, max_iterations)``, ``update(minibatches)``,
``state_dict()`` and ``load_state_dict(state)``; an offline one (``spec.offline``) also
``draw_minibatches(data, count, batch_size)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from rl_core.algorithms.actor_critic_family import ActorCriticSpec
from rl_core.registry import Registry
from rl_core.training.iql_update import IQLLearner
from rl_core.training.sac_update import SACLearner

#: ``factory(policy, spec, algorithm, actor, seed) -> learner``: ``algorithm`` and ``actor``
#: are the config's sections.
LearnerFactory = Callable[[nn.Module, ActorCriticSpec, Any, Any, int], Any]
OFF_POLICY_LEARNERS: Registry[LearnerFactory] = Registry("off-policy learner")


def register_learner(name: str, factory: LearnerFactory, *, force: bool = False) -> None:
    """Register the learner ``name`` (what ``ActorCriticSpec.learner`` names)."""
    OFF_POLICY_LEARNERS.register(name, factory, force=force)


def build_learner(
    policy: nn.Module, spec: ActorCriticSpec, algorithm: Any, actor: Any, seed: int
) -> Any:
    """The learner of ``spec`` for ``policy`` (already on its device).

    Args:
        policy: The policy the learner updates.
        spec: The algorithm's spec.
        algorithm: The ``algorithm`` section (``gamma``, ``off_policy`` and the algorithm's
            own settings).
        actor: The ``actor`` section (optimizers and schedule).
        seed: Seed of the learner's generator.
    """
    return OFF_POLICY_LEARNERS.get(spec.learner)(policy, spec, algorithm, actor, seed)


register_learner(
    "sac",
    lambda policy, spec, algorithm, actor, seed: SACLearner(
        policy, spec, algorithm.off_policy, actor, algorithm.gamma, seed
    ),
)
register_learner(
    "iql",
    lambda policy, spec, algorithm, actor, seed: IQLLearner(
        policy, spec, algorithm.off_policy, algorithm.iql, actor, algorithm.gamma, seed
    ),
)
