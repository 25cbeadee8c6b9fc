"""Which embodied runtime trains a config: on-policy PPO, or off-policy with a replay buffer.

The embodied kind names :func:`runtime_for` as its runtime (a choice made once, at start-up).
"""

from __future__ import annotations

from infra.driver.step_runtime import StepRuntime
from kinds.embodied.config import EmbodiedConfig
from kinds.embodied.off_policy import OffPolicyRuntime
from kinds.embodied.runtime import EmbodiedRuntime
from rl_core.algorithms.actor_critic_family import actor_critic_spec


def runtime_for(cfg: EmbodiedConfig) -> type[StepRuntime]:
    """Off-policy algorithms (SAC, CrossQ, RLPD) train with a replay buffer worker."""
    if actor_critic_spec(cfg.algorithm.loss_type) is None:
        return EmbodiedRuntime
    return OffPolicyRuntime
