"""What rlpipe reads from the Meta-World package: task names, initial states and experts.

Meta-World (``pip install 'rlpipe[metaworld]'``) is imported on the first call of a
function here, never when this module is imported.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

from rl_core.envs.metaworld_instructions import unknown_task_message
from rl_core.envs.mujoco_rendering import default_to_headless_gl

INSTALL_HINT = "pip install 'rlpipe[metaworld]' (in a checkout: bash scripts/setup_venv.sh)"
#: Meta-World's episode length (``max_path_length``), the default of ``env.max_episode_steps``.
MAX_PATH_LENGTH = 500
#: Initial states per task in Meta-World's benchmarks (``MT1(task).train_tasks``).
NUM_VARIATIONS = 50
#: Seed of the ``MT1`` benchmark whose initial states the envs play (the same everywhere).
BENCHMARK_SEED = 0

_VARIATIONS_LOCK = threading.Lock()
_VARIATIONS: dict[str, list[Any]] = {}


def import_metaworld(module: str = "metaworld") -> ModuleType:
    """Import ``module`` of Meta-World, rendering headless where there is no display.

    Args:
        module: ``metaworld`` or one of its submodules.

    Returns:
        The imported module.

    Raises:
        ImportError: Meta-World is not installed; the message says how to install it.
    """
    default_to_headless_gl()
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"env_type metaworld needs Meta-World: {INSTALL_HINT} ({exc})") from exc


def metaworld_task_names() -> list[str]:
    """The names of Meta-World's V3 tasks (imports Meta-World)."""
    return list(import_metaworld("metaworld.env_dict").ALL_V3_ENVIRONMENTS)


def metaworld_env_class(task: str) -> type:
    """Meta-World's env class of ``task`` (imports Meta-World)."""
    return import_metaworld("metaworld.env_dict").ALL_V3_ENVIRONMENTS[task]


def metaworld_expert(task: str) -> Any:
    """Meta-World's scripted expert of ``task``: ``policy.get_action(state) -> action``.

    ``state`` is Meta-World's raw 39-number state (``info["state"]`` or
    :meth:`~rl_core.envs.metaworld_env.MetaWorldEnv.state`), not the observation (which may
    carry a task one-hot).

    Args:
        task: A Meta-World V3 task name.

    Returns:
        A new instance of the task's scripted policy.

    Raises:
        KeyError: Meta-World has no expert of ``task``.
    """
    policies = import_metaworld("metaworld.policies").ENV_POLICY_MAP
    if task not in policies:
        raise KeyError(unknown_task_message(task, list(policies)))
    return policies[task]()


def task_variations(task: str) -> list[Any]:
    """The 50 initial states of ``task`` in Meta-World's ``MT1`` benchmark (cached).

    Args:
        task: A Meta-World V3 task name.

    Returns:
        The benchmark's ``train_tasks`` of ``task``, to pass to ``env.set_task``.
    """
    with _VARIATIONS_LOCK:
        if task not in _VARIATIONS:
            benchmark = import_metaworld().MT1(task, seed=BENCHMARK_SEED)
            _VARIATIONS[task] = list(benchmark.train_tasks)
        return _VARIATIONS[task]
