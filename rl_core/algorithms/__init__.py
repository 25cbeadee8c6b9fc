"""Pure RL algorithm pieces: advantage estimators, policy/value losses and KL estimators.

Importing this package registers the built-ins: advantage estimators ``"gae"`` and
``"grpo"``, policy loss ``"ppo"`` and KL estimators ``"k1"``, ``"k2"``, ``"k3"``,
``"low_var_kl"``.
"""

from rl_core.algorithms.advantages import (
    compute_gae,
    compute_group_advantages,
    normalize_advantages,
)
from rl_core.algorithms.kl import KL_ESTIMATORS, kl_penalty
from rl_core.algorithms.losses import (
    compute_ppo_policy_loss,
    compute_value_loss,
    entropy_bonus,
    masked_mean,
)
from rl_core.algorithms.registry import (
    ADVANTAGES,
    POLICY_LOSSES,
    AdvantageFn,
    PolicyLossFn,
    get_advantage,
    get_policy_loss,
    register_advantage,
    register_policy_loss,
)

__all__ = [
    "ADVANTAGES",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "AdvantageFn",
    "PolicyLossFn",
    "compute_gae",
    "compute_group_advantages",
    "compute_ppo_policy_loss",
    "compute_value_loss",
    "entropy_bonus",
    "get_advantage",
    "get_policy_loss",
    "kl_penalty",
    "masked_mean",
    "normalize_advantages",
    "register_advantage",
    "register_policy_loss",
]
