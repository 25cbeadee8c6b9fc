"""Reward functions applied to collected rollouts.

Importing this package registers the built-in rewards: ``env`` (embodied) and the reasoning
rewards ``math_verify``, ``format``, ``composite``, ``code_tests`` (unit tests in a sandbox),
``code_io`` (input/output test cases in the sandbox, verl's code rows), ``humaneval`` (HumanEval's unit tests in the sandbox), ``reward_model`` (the model of
``reward.model``, scored by reward-model workers), ``function`` (your function,
``reward.function``) and ``data_source`` (the built-in reward each row's ``data_source``
names, verl's convention).
"""

import rl_core.rewards.builtin  # noqa: F401 - registers the embodied reward
import rl_core.rewards.code_io  # noqa: F401 - registers code_io
import rl_core.rewards.code_tests  # noqa: F401 - registers code_tests
import rl_core.rewards.data_source  # noqa: F401 - registers data_source
import rl_core.rewards.humaneval  # noqa: F401 - registers humaneval
import rl_core.rewards.model_reward  # noqa: F401 - registers reward_model and judge parsers
import rl_core.rewards.reasoning  # noqa: F401 - registers the reasoning rewards
import rl_core.rewards.user_function  # noqa: F401 - registers function
from rl_core.rewards.registry import REWARDS, build_reward, get_reward, register_reward

__all__ = ["REWARDS", "build_reward", "get_reward", "register_reward"]
