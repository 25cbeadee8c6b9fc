"""The public extension API: everything a package outside rlpipe needs to plug parts in.

Import from here in your own package, register in a ``register()`` function, and name the
module in ``RLPIPE_EXT_MODULE`` so the driver, every Ray worker and the standalone tools
(evaluate flow, checkpoint converter) import it::

    from rl_core.api import BasePolicy, register_env, register_model

    def register() -> None:
        register_env("my_env", make_my_env)
        register_model("my_policy", MyPolicy, category="embodied")

Importing this module loads the built-in entries first, so ``force=True`` replaces a
built-in for good. See ``docs/extending.md``.
"""

from rl_core.agents.context import register_agent_context
from rl_core.agents.loops import Generation, LoopSettings, ModelIO, register_agent_loop
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.parsers import ParseError, ToolCall, ToolParser, register_tool_parser
from rl_core.agents.tools import Tool, register_tool
from rl_core.agents.trajectory import Budget, Trajectory
from rl_core.algorithms.registry import (
    AdvantageFn,
    PolicyLossFn,
    register_advantage,
    register_policy_loss,
)
from rl_core.data.prompts import PromptSample
from rl_core.data.sources import PromptSource, register_prompt_source, source_options
from rl_core.envs.registry import EnvFactory, EnvSpaces, register_batched_env, register_env
from rl_core.envs.spaces import register_space_codec
from rl_core.models.base_policy import BasePolicy, flat_states, obs_tensor, policy_device
from rl_core.models.registry import CATEGORIES, ModelBuilder, register_model
from rl_core.models.sampling_noise import multinomial_on_device, standard_normal_like
from rl_core.registries import load_builtins
from rl_core.registry import RegistryError
from rl_core.rewards.data_source import register_data_source
from rl_core.rewards.model_reward import register_judge_parser
from rl_core.rewards.registry import register_reward

load_builtins()

__all__ = [
    "CATEGORIES",
    "AdvantageFn",
    "BasePolicy",
    "Budget",
    "EnvFactory",
    "EnvSpaces",
    "Generation",
    "LoopSettings",
    "ModelBuilder",
    "ModelIO",
    "Outcome",
    "ParseError",
    "PolicyLossFn",
    "PromptSample",
    "PromptSource",
    "RegistryError",
    "Tool",
    "ToolCall",
    "ToolParser",
    "ToolResult",
    "Trajectory",
    "flat_states",
    "multinomial_on_device",
    "obs_tensor",
    "policy_device",
    "register_advantage",
    "register_agent_context",
    "register_agent_loop",
    "register_batched_env",
    "register_data_source",
    "register_env",
    "register_judge_parser",
    "register_model",
    "register_policy_loss",
    "register_prompt_source",
    "register_reward",
    "register_space_codec",
    "register_tool",
    "register_tool_parser",
    "source_options",
    "standard_normal_like",
]
