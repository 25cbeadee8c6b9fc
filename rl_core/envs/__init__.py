"""Environments: the env registry and the vectorized gymnasium adapter."""

from rl_core.envs.action_chunk import ActionChunk
from rl_core.envs.registry import (
    ENVS,
    EnvSpaces,
    get_env_factory,
    make_single_env,
    probe_spaces,
    register_env,
)
from rl_core.envs.vector import VectorEnvAdapter

__all__ = [
    "ENVS",
    "ActionChunk",
    "EnvSpaces",
    "VectorEnvAdapter",
    "get_env_factory",
    "make_single_env",
    "probe_spaces",
    "register_env",
]
