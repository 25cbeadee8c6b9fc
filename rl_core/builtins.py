"""Importing this module registers every built-in model, env, algorithm and reward."""

import rl_core.algorithms  # noqa: F401
import rl_core.envs.registry  # noqa: F401
import rl_core.models.mlp_actor_critic  # noqa: F401
import rl_core.models.sac_policy  # noqa: F401
import rl_core.rewards.builtin  # noqa: F401
import rl_core.rewards.reasoning  # noqa: F401
from rl_core.models.hf_builder import build_hf_causal_lm
from rl_core.models.registry import register_model

register_model("hf_causal_lm", build_hf_causal_lm, category="reasoning")
