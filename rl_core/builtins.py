"""Importing this module registers every built-in model, env, algorithm and reward."""

import rl_core.algorithms  # noqa: F401
import rl_core.envs.registry  # noqa: F401
import rl_core.models.mlp_actor_critic  # noqa: F401
import rl_core.rewards.builtin  # noqa: F401
