"""ManiSkill3's table-top tasks as the env type ``maniskill`` (``env.manipulation``).

ManiSkill3 (``pip install 'rlpipe[maniskill]'``) is imported when an env is made or a config
with ``env_type: maniskill`` is validated, never when this module is imported. It renders
(and, even for state observations, starts) through Vulkan: on a machine without a GPU, a
CPU Vulkan driver (Mesa 25's lavapipe: ``bash scripts/setup_vulkan.sh``).

One env is one ManiSkill env on its CPU physics backend (``num_envs=1``); rlpipe's env
workers run several side by side, as for every env type. An env worker with a GPU runs its
envs in one simulator on ManiSkill's GPU backend instead
(:mod:`rl_core.envs.maniskill_batched`, ``env.vectorization``). The first of ``tasks`` is played
(ManiSkill's tasks differ in their state size, so one env plays one task).

Seeds: a reset with seed ``s`` resets ManiSkill with ``s``, which places the objects and the
goal; resets without a seed (autoresets) draw the next seed from a generator seeded at the
last seeded reset. Envs reset with the same seed (one GRPO group) start from the same state.

Observations (``obs_mode``):

- ``state``: ``Box(D,)`` float32, ManiSkill's flat state (robot joints, the tool's pose,
  objects and goal; ``D`` depends on the task);
- ``rgb``: ``Dict(main_images=Box(0, 255, (S, S, 3), uint8), task_descriptions=Text)``:
  the camera image and the task's instruction (:data:`INSTRUCTIONS`);
- ``rgb+state``: both, the state under ``states``.

``info`` of every step and reset: ``success`` (1.0 or 0.0), ``task`` and ``instruction``.

Pickling (checkpoints) replays from seeds: ManiSkill's own state restore
(``set_state_dict``) is off by about 1e-6 after a step, so a pickled env keeps the seed of
its episode and the actions played since, and unpickling resets a new simulator with that
seed and plays the actions again. ManiSkill's physics is deterministic, so the copy continues
bit for bit (tested with random actions) where the simulator's past episodes left no trace:
PhysX's persistent contact manifolds carry contact data across a reset, so after episodes
with contacts (a pushed cube) the copy can drift by float rounding (docs/manipulation.md).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.manipulation_obs import MAX_INSTRUCTION_LENGTH, observation, observation_space
from rl_core.envs.maniskill_sim import (
    DEFAULT_CAMERA,
    DEFAULT_CONTROL_MODE,
    flags,
    import_maniskill,
    make_sim,
    score_steps,
    state_dim,
    to_numpy,
)
from rl_core.envs.replay_pickling import ReplayPickling

logger = logging.getLogger(__name__)

#: Short English instructions of ManiSkill's table-top tasks (others: made from the id).
INSTRUCTIONS: dict[str, str] = {
    "PushCube-v1": "push the cube to the red and white target",
    "PullCube-v1": "pull the cube to the red and white target",
    "PickCube-v1": "pick up the cube and move it to the goal",
    "StackCube-v1": "stack the red cube on top of the green cube",
    "PegInsertionSide-v1": "insert the peg into the hole from the side",
    "PushT-v1": "push the T-shaped block onto the target",
    "PokeCube-v1": "use the peg to poke the cube to the goal",
    "PlaceSphere-v1": "place the sphere into the bin",
    "LiftPegUpright-v1": "lift the peg and stand it upright",
    "PullCubeTool-v1": "use the tool to pull the cube closer",
    "RollBall-v1": "push the ball so that it rolls to the goal",
    "PlugCharger-v1": "plug the charger into the receptacle",
    "StackPyramid-v1": "stack the three cubes into a pyramid",
    "TwoRobotPickCube-v1": "pass the cube between the two robots to the goal",
    "TwoRobotStackCube-v1": "stack the cubes with the two robots",
}


def maniskill_instruction(task: str) -> str:
    """The instruction of ``task``: from :data:`INSTRUCTIONS`, else made from the task id."""
    if task in INSTRUCTIONS:
        return INSTRUCTIONS[task]
    name = task.rsplit("-v", 1)[0]
    words = "".join(f" {c.lower()}" if c.isupper() else c for c in name).split()
    return ("solve the task " + " ".join(words))[:MAX_INSTRUCTION_LENGTH]


def maniskill_episode_steps(task: str) -> int:
    """ManiSkill's episode length of ``task`` (the default of ``env.max_episode_steps``)."""
    import_maniskill()
    registration = importlib.import_module("mani_skill.utils.registration")
    steps = registration.REGISTERED_ENVS[task].max_episode_steps
    return int(steps) if steps else 100


class ManiSkillEnv(ReplayPickling, gym.Env):
    """One ManiSkill3 task with rlpipe's observations, seeding and pickling (module docs).

    Args:
        task: ManiSkill3 task id, e.g. ``PushCube-v1``.
        obs_mode: ``state``, ``rgb`` or ``rgb+state``.
        control_mode: ManiSkill's controller (e.g. ``pd_ee_delta_pos``, ``pd_joint_delta_pos``).
        image_size: Side of the camera images of the observations.
        camera: Sensor camera of the images.
        render_size: Side of the frames :meth:`render` returns; None: ``image_size``.
        reward: ``dense`` (ManiSkill's normalized dense reward, 0 to 1 a step) or
            ``success`` (1.0 on the step the task first succeeds in the episode).
        terminate_on_success: End the episode on a successful step (ManiSkill's own
            failure conditions always end it).
        reset_on_success: End the episode on a successful step as a time limit does
            (truncated, so the value bootstraps from its final observation).
        max_episode_steps: Steps before the episode is truncated; None: ManiSkill's.
        render_mode: None or ``rgb_array``.

    Raises:
        ValueError: An unknown mode, or a camera or control mode the task does not have.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        task: str = "PushCube-v1",
        obs_mode: str = "state",
        control_mode: str = DEFAULT_CONTROL_MODE,
        image_size: int = 64,
        camera: str = DEFAULT_CAMERA,
        render_size: int | None = None,
        reward: str = "dense",
        terminate_on_success: bool = False,
        reset_on_success: bool = False,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        for name, value, allowed in (
            ("obs_mode", obs_mode, ("state", "rgb", "rgb+state")),
            ("reward", reward, ("dense", "success")),
            ("render_mode", render_mode, (None, "rgb_array")),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        self._settings = {
            "task": task,
            "obs_mode": obs_mode,
            "control_mode": control_mode,
            "image_size": int(image_size),
            "camera": camera,
            "render_size": render_size,
            "reward": reward,
            "terminate_on_success": terminate_on_success,
            "reset_on_success": reset_on_success,
            "max_episode_steps": max_episode_steps,
            "render_mode": render_mode,
        }
        self.task = task
        self.obs_mode = obs_mode
        self.control_mode = control_mode
        self.image_size = int(image_size)
        self.camera = camera
        self.render_size = int(render_size or image_size)
        self.reward_mode = reward
        self.terminate_on_success = terminate_on_success
        self.reset_on_success = reset_on_success
        self.render_mode = render_mode
        self.instruction = maniskill_instruction(task)
        self.sim = self._make_sim()
        self.max_episode_steps = int(max_episode_steps or maniskill_episode_steps(task))
        action = self.sim.single_action_space
        self.action_space = gym.spaces.Box(
            np.asarray(action.low, np.float32), np.asarray(action.high, np.float32)
        )
        self._state_dim = state_dim(self.sim)
        self.observation_space = self._observation_space()
        self._init_replay()
        self._obs: dict[str, Any] | None = None
        self._succeeded = False
        self._planning_copy: ManiSkillEnv | None = None

    # -- spaces and properties -----------------------------------------------------------

    def _make_sim(self) -> Any:
        return make_sim(
            self.task,
            obs_mode=self.obs_mode,
            control_mode=self.control_mode,
            image_size=self.image_size,
            camera=self.camera,
            render_size=self.render_size if self.render_mode == "rgb_array" else None,
        )

    def _observation_space(self) -> gym.spaces.Space:
        return observation_space(self.obs_mode, self._state_dim, self.image_size)

    # -- gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode from the seed's initial state (module docstring).

        Args:
            seed: Reset seed; None draws from the generator of the last seeded reset.
            options: Not used (accepted for the gymnasium API).
        """
        episode_seed = self._episode_seed_for(seed)
        obs, info = self.sim.reset(seed=episode_seed)
        self._start_episode(episode_seed)
        self._obs = obs
        self._succeeded = False
        return self._observation(), self._info(info)

    def step_without_observation(self, action: Any) -> tuple[float, bool, bool, dict[str, Any]]:
        """:meth:`step` that leaves the observation to :meth:`current_observation`.

        ManiSkill makes the observation on every step; the method exists so that
        :class:`~rl_core.envs.action_chunk.ActionChunk` treats every simulator alike.
        """
        self._require_episode("step")
        action = np.clip(
            np.asarray(action, dtype=np.float32).reshape(self.action_space.shape),
            self.action_space.low,
            self.action_space.high,
        )
        self._actions.append(action)
        obs, reward, _, _, info = self.sim.step(action[None])
        self._obs = obs
        rewards, terminated, truncated, succeeded = score_steps(
            to_numpy(reward).reshape(1),
            flags(info, "success", 1),
            flags(info, "fail", 1),
            np.array([self._succeeded]),
            np.array([len(self._actions)]),
            reward_mode=self.reward_mode,
            terminate_on_success=self.terminate_on_success,
            max_episode_steps=self.max_episode_steps,
            reset_on_success=self.reset_on_success,
        )
        self._succeeded = bool(succeeded[0])
        return float(rewards[0]), bool(terminated[0]), bool(truncated[0]), self._info(info)

    def render(self) -> np.ndarray | None:
        """The render camera's frame at ``render_size``, with ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            gym.logger.warn("ManiSkillEnv.render() needs render_mode='rgb_array'")
            return None
        self._require_episode("render")
        frame = to_numpy(self.sim.render())
        return np.ascontiguousarray(frame.reshape(frame.shape[-3:]).astype(np.uint8))

    def close(self) -> None:
        """Close the simulator (and that of :meth:`planning_copy`)."""
        if getattr(self, "_planning_copy", None) is not None:
            self._planning_copy.close()
            self._planning_copy = None
        if getattr(self, "sim", None) is not None:
            self.sim.close()
            self.sim = None
        super().close()

    # -- internals -----------------------------------------------------------------------

    def _observation(self) -> Any:
        assert self._obs is not None
        raw = self._obs if self.obs_mode == "state" else self._obs["state"]
        state = to_numpy(raw).reshape(-1).astype(np.float32)
        return observation(self.obs_mode, state, self._camera_image, self.instruction)

    def _camera_image(self) -> np.ndarray:
        assert self._obs is not None
        image = to_numpy(self._obs["sensor_data"][self.camera]["rgb"])
        return np.ascontiguousarray(image.reshape(image.shape[-3:]), np.uint8)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "success": float(flags(info, "success", 1)[0]),
            "task": self.task,
            "instruction": self.instruction,
        }

    # -- pickling: replay from the episode's seed ------------------------------------------

    def planning_copy(self) -> ManiSkillEnv:
        """A state-only env in this env's current state, to play ahead on (made once).

        Scripted experts choose action chunks on it; this env is not touched.
        """
        if self._episode_seed is None:
            raise RuntimeError("call reset() first")
        if self._planning_copy is None:
            self._planning_copy = ManiSkillEnv(
                task=self.task,
                control_mode=self.control_mode,
                max_episode_steps=self.max_episode_steps,
            )
        self._planning_copy.replay(self._episode_seed, self._actions)
        return self._planning_copy
