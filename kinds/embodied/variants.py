"""Which embodied runtime trains a config: on-policy, off-policy or offline.

On-policy PPO, off-policy algorithms with a replay buffer, offline ones from a dataset.

The embodied kind names :func:`runtime_for` as its runtime (a choice made once, at start-up).
"""

from __future__ import annotations

from infra.driver.step_runtime import StepRuntime
from kinds.embodied.config import EmbodiedConfig
from kinds.embodied.off_policy import OffPolicyRuntime
from kinds.embodied.offline import OfflineRuntime
from kinds.embodied.runtime import EmbodiedRuntime
from rl_core.algorithms.actor_critic_family import actor_critic_spec


def runtime_for(cfg: EmbodiedConfig) -> type[StepRuntime]:
    """The runtime of ``cfg``'s algorithm.

    Off-policy algorithms (SAC, CrossQ, RLPD) train with a replay buffer worker, offline
    ones (IQL) from the demonstration dataset alone.
    """
    spec = actor_critic_spec(cfg.algorithm.loss_type)
    if spec is None:
        return EmbodiedRuntime
    return OfflineRuntime if spec.offline else OffPolicyRuntime
