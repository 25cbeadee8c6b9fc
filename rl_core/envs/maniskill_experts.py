"""Scripted experts of ManiSkill3's cube tasks (``rlpipe demos`` with ``env_type: maniskill``).

Each expert reads the simulator (the tool's position, the cube, the goal) and steers the
tool with ``pd_ee_delta_pos`` actions (``[dx, dy, dz, gripper]`` in [-1, 1], 1 = 10 cm, a
gripper of 1 opens and -1 closes it). They hold no state between steps, so the action is a
function of the simulator state alone: replays and action chunks see the same expert.

ManiSkill ships motion planners for these tasks (``mani_skill.examples.motionplanning``,
on ``mplib``), which write joint-position trajectories; ``mplib`` crashes (segmentation
fault) beside NumPy 2, which the rest of rlpipe needs, so rlpipe plays these experts instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.experts import register_expert
from rl_core.envs.maniskill_env import ManiSkillEnv
from rl_core.registry import Registry

#: ``expert(sim) -> [4]`` action of ``pd_ee_delta_pos`` from ManiSkill's env (unwrapped).
TaskExpert = Callable[[Any], np.ndarray]
TASK_EXPERTS: Registry[TaskExpert] = Registry("ManiSkill3 scripted expert")
#: The control mode the experts act in.
EXPERT_CONTROL_MODE = "pd_ee_delta_pos"
#: Metres of tool motion of an action of 1.
_STEP = 0.1
#: Height above the cube at which the tool travels.
_CLEARANCE = 0.05


def _vec(value: Any) -> np.ndarray:
    return np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)[0]


def _towards(tool: np.ndarray, target: np.ndarray, gripper: float) -> np.ndarray:
    motion = np.clip((target - tool) / _STEP, -1.0, 1.0)
    return np.append(motion, gripper).astype(np.float32)


@TASK_EXPERTS.decorator("PickCube-v1")
def pick_cube(sim: Any) -> np.ndarray:
    """Above the cube, down, grasp, carry it to the goal."""
    tool, cube = _vec(sim.agent.tcp.pose.p), _vec(sim.cube.pose.p)
    if bool(_vec(sim.agent.is_grasping(sim.cube)[None])):
        return _towards(tool, _vec(sim.goal_site.pose.p), -1.0)
    if np.linalg.norm(tool[:2] - cube[:2]) > 0.01:
        above = np.array([cube[0], cube[1], max(tool[2], cube[2] + _CLEARANCE)])
        return _towards(tool, above, 1.0)
    if tool[2] - cube[2] > 0.01:
        return _towards(tool, cube, 1.0)
    return _towards(tool, cube, -1.0)


def _push_along_x(sim: Any, direction: float) -> np.ndarray:
    """Behind the cube (seen from the goal), down, then push it along x past the goal."""
    tool, cube = _vec(sim.agent.tcp.pose.p), _vec(sim.obj.pose.p)
    goal = _vec(sim.goal_region.pose.p)
    behind = cube - np.array([direction * 0.05, 0.0, 0.0])
    lined_up = (
        direction * (cube[0] - tool[0]) > 0.03
        and abs(tool[1] - cube[1]) < 0.015
        and tool[2] < cube[2] + 0.015
    )
    if lined_up:
        target = np.array([goal[0] + direction * 0.02, cube[1], cube[2]])
        return _towards(tool, target, -1.0)
    if np.linalg.norm(tool[:2] - behind[:2]) > 0.015:
        return _towards(tool, np.append(behind[:2], cube[2] + _CLEARANCE), -1.0)
    return _towards(tool, behind, -1.0)


@TASK_EXPERTS.decorator("PushCube-v1")
def push_cube(sim: Any) -> np.ndarray:
    """Push the cube forwards (+x) onto the target."""
    return _push_along_x(sim, 1.0)


@TASK_EXPERTS.decorator("PullCube-v1")
def pull_cube(sim: Any) -> np.ndarray:
    """Pull the cube backwards (-x) onto the target."""
    return _push_along_x(sim, -1.0)


#: The ManiSkill3 tasks that have a scripted expert.
EXPERT_TASKS = ("PickCube-v1", "PushCube-v1", "PullCube-v1")


def expert_actions(env: ManiSkillEnv, count: int = 1) -> np.ndarray:
    """The expert's next ``count`` actions of ``env``, ``[count, 4]`` float32.

    For ``count > 1`` (action chunks) a state-only copy of ``env`` replays the episode and
    plays ahead: the actions are exactly those the expert would choose step by step. Actions
    past the end of the episode repeat the last one.

    Raises:
        ValueError: ``env``'s task has no expert, or it is not controlled in
            ``pd_ee_delta_pos``.
    """
    if env.control_mode != EXPERT_CONTROL_MODE:
        raise ValueError(
            f"the ManiSkill3 experts act in control_mode {EXPERT_CONTROL_MODE}; this env "
            f"uses {env.control_mode!r} (set env.manipulation.control_mode)"
        )
    expert = TASK_EXPERTS.get(env.task)
    if count == 1:
        return expert(env.sim)[None]
    scout = env.planning_copy()
    actions = [expert(scout.sim)]
    while len(actions) < count and scout.steps < env.max_episode_steps - 1:
        scout.step_without_observation(actions[-1])
        actions.append(expert(scout.sim))
    actions += [actions[-1]] * (count - len(actions))
    return np.stack(actions)


def play_maniskill_expert(env: gym.Env, obs: Any, info: dict[str, Any]) -> np.ndarray:
    """The scripted expert of ``env_type: maniskill`` (``rlpipe demos``): the env's action.

    Reads the simulator, not ``obs``, so it drives pixel observations too; with action
    chunks it returns a whole chunk.
    """
    base = env.unwrapped
    if not isinstance(base, ManiSkillEnv):
        raise TypeError(f"the maniskill expert needs a ManiSkillEnv, got {type(base).__name__}")
    count = int(np.prod(env.action_space.shape)) // 4
    return expert_actions(base, count).reshape(-1)


register_expert("maniskill", play_maniskill_expert)
