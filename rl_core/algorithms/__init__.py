"""Pure RL algorithm pieces: advantage estimators, policy/value losses and KL estimators.

Importing this package registers the built-ins: advantage estimators ``"gae"``, ``"grpo"``,
``"dr_grpo"``, ``"rloo"``, ``"reinforce_plus_plus"``, ``"reinforce_plus_plus_baseline"``
and ``"token_gae"``; policy losses ``"ppo"`` and ``"decoupled_ppo"``; importance-sampling
corrections ``"tis"`` and ``"mis"``; KL estimators ``"k1"``, ``"k2"``, ``"k3"``,
``"low_var_kl"`` and their straight-through ``+`` variants; the loss aggregation modes.
"""

from rl_core.algorithms.advantages import (
    compute_gae,
    compute_group_advantages,
    normalize_advantages,
)
from rl_core.algorithms.aggregation import (
    LOSS_AGGREGATIONS,
    aggregate_loss,
    aggregation_weights,
    count_sequences,
)
from rl_core.algorithms.dapo import informative_groups, overlong_penalty
from rl_core.algorithms.groups import GroupIndexError, Groups, consecutive_groups
from rl_core.algorithms.kl import KL_ESTIMATORS, kl_penalty
from rl_core.algorithms.llm_advantages import (
    compute_dr_grpo_advantages,
    compute_reinforce_plus_plus_advantages,
    compute_reinforce_plus_plus_baseline_advantages,
    compute_rloo_advantages,
    compute_token_gae,
    discounted_token_returns,
)
from rl_core.algorithms.losses import (
    compute_ppo_policy_loss,
    compute_value_loss,
    masked_mean,
    value_loss_elements,
)
from rl_core.algorithms.off_policy import (
    IS_CORRECTIONS,
    compute_decoupled_ppo_loss,
    importance_weights,
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
    "GroupIndexError",
    "Groups",
    "IS_CORRECTIONS",
    "compute_decoupled_ppo_loss",
    "importance_weights",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "aggregate_loss",
    "aggregation_weights",
    "count_sequences",
    "compute_dr_grpo_advantages",
    "compute_reinforce_plus_plus_advantages",
    "compute_reinforce_plus_plus_baseline_advantages",
    "compute_rloo_advantages",
    "compute_token_gae",
    "discounted_token_returns",
    "informative_groups",
    "overlong_penalty",
    "POLICY_LOSSES",
    "AdvantageFn",
    "PolicyLossFn",
    "compute_gae",
    "compute_group_advantages",
    "compute_ppo_policy_loss",
    "compute_value_loss",
    "consecutive_groups",
    "get_advantage",
    "get_policy_loss",
    "kl_penalty",
    "masked_mean",
    "normalize_advantages",
    "register_advantage",
    "register_policy_loss",
    "value_loss_elements",
]
