"""Scripted experts by env type: the policies that make demonstrations (``rlpipe demos``).

An expert is ``expert(env, obs, info) -> action``: it may read the env itself (a motion
planner needs the simulator), the observation and the step's info, and returns the env
action. Register one per env type with :func:`register_expert`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rl_core.registry import Registry

#: ``expert(env, obs, info) -> action``.
Expert = Callable[[Any, Any, dict[str, Any]], np.ndarray]

#: Built-in experts register when these modules are imported (on first use of the registry).
EXPERTS: Registry[Expert] = Registry(
    "scripted expert", ("rl_core.envs.metaworld_registration", "rl_core.envs.maniskill_experts")
)


def register_expert(env_type: str, expert: Expert, *, force: bool = False) -> Expert:
    """Register the scripted expert of ``env_type`` (``rlpipe demos`` plays it)."""
    return EXPERTS.register(env_type, expert, force=force)


def expert_for(env_type: str) -> Expert:
    """The expert of ``env_type`` (the error lists the env types that have one)."""
    return EXPERTS.get(env_type)
