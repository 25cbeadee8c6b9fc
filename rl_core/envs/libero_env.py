"""LIBERO's manipulation suites as the env type ``libero`` (``env.manipulation``).

One env plays one task at a time on LIBERO's Franka Panda (robosuite 1.4, its operational
space controller); ``tasks`` lists the suite's tasks the env may play (names or indices, see
:func:`~rl_core.envs.libero_suites.resolve_task`). LIBERO is imported when an env is made,
never when this module is imported.

Tasks, initial states and seeds: a reset with seed ``s`` plays task ``tasks[s % n]``
(``n = len(tasks)``) from the suite's fixed initial state ``(s // n) % 50`` (LIBERO ships 50
per task). Consecutive seeds thus walk through distinct (task, initial state) pairs: the
fixed evaluation seeds of a run (consecutive numbers) play ``n x 50`` distinct episodes
before any repeats. Resets without a seed (autoresets) draw the next seed from a generator
seeded at the last seeded reset. Envs reset with the same seed (one GRPO group) start from
the same state.

Observations (``obs_mode``):

- ``state``: ``Box(8 + 14 k,)`` float32: the proprioception (below) and LIBERO's
  ``object-state`` (14 numbers for each of the scene's ``k`` movable objects, so the tasks
  of one env must have as many objects);
- ``rgb``: ``Dict(main_images=Box(0, 255, (S, S, 3), uint8), task_descriptions=Text)``: the
  camera image, upright (LIBERO's images come upside down; turned 180 degrees as
  OpenVLA does), and the task's language instruction;
- ``rgb+state``: both, with the 8 numbers of proprioception under ``states``: the tool's
  position (3), its orientation as an axis-angle (3) and the gripper fingers' positions
  (2), as OpenVLA-OFT and RLinf read them.

Actions: ``Box(-1, 1, (7,))``: the tool's motion (3) and rotation (3) and the gripper
(-1 opens, 1 closes), LIBERO's own. The reward is the success: 1.0 on the step the task
first succeeds in the episode (LIBERO has no shaped reward). ``info`` of every step and
reset: ``success`` (1.0 or 0.0), ``task`` (LIBERO's task name), ``instruction``.

Pickling (checkpoints) replays from seeds, as the ``maniskill`` env type does: a pickled env
keeps its settings, the seed of its episode and the actions played since, and unpickling
builds the simulator again, resets it with that seed and plays the actions again. LIBERO's
reset and physics do not depend on the episodes played before, so the copy continues bit
for bit (tested, for states and images).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.libero_suites import (
    PROPRIO_SIZE,
    SUITE_EPISODE_STEPS,
    import_libero,
    init_states,
    quat_to_axis_angle,
    resolve_task,
    state_size,
    suite_message,
    suite_task,
)
from rl_core.envs.manipulation_obs import observation, observation_space
from rl_core.envs.replay_pickling import SEED_RANGE, ReplayPickling

#: LIBERO's cameras: the scene camera and the one on the gripper.
CAMERAS = ("agentview", "robot0_eye_in_hand")
DEFAULT_CAMERA = "agentview"
#: Simulators of distinct tasks one env keeps built. Building one takes 1-3 s, but each holds
#: ~0.5 GB (its meshes; ~0.9 GB with a camera, whose renderer keeps the textures): one.
_MAX_SIMS = 1


class LiberoEnv(ReplayPickling, gym.Env):
    """LIBERO tasks with rlpipe's observations, seeding and pickling (module docstring).

    Args:
        suite: LIBERO suite, e.g. ``libero_spatial``.
        tasks: The suite's tasks the env plays: task names or indices (``"0"``, ``"3"``).
        obs_mode: ``state``, ``rgb`` or ``rgb+state``.
        image_size: Side of the camera images of the observations.
        camera: ``agentview`` (the scene) or ``robot0_eye_in_hand`` (on the gripper).
        render_size: Side of the frames :meth:`render` returns; None: ``image_size``.
        reward: ``success`` (the only reward LIBERO has).
        terminate_on_success: End the episode on a successful step.
        reset_on_success: End the episode on a successful step as a time limit does
            (truncated, so the value bootstraps from its final observation).
        max_episode_steps: Steps before the episode is truncated; None: the suite's.
        render_mode: None or ``rgb_array``.

    Raises:
        ValueError: An unknown suite, task, camera or mode, or tasks whose states differ in
            size in ``state`` observations.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        suite: str = "libero_spatial",
        tasks: tuple[str, ...] | list[str] = ("0",),
        obs_mode: str = "rgb",
        image_size: int = 128,
        camera: str = DEFAULT_CAMERA,
        render_size: int | None = None,
        reward: str = "success",
        terminate_on_success: bool = False,
        reset_on_success: bool = False,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        for name, value, allowed in (
            ("obs_mode", obs_mode, ("state", "rgb", "rgb+state")),
            ("reward", reward, ("success",)),
            ("camera", camera, CAMERAS),
            ("render_mode", render_mode, (None, "rgb_array")),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if suite not in SUITE_EPISODE_STEPS:
            raise ValueError(suite_message(suite))
        self._settings = {
            "suite": suite,
            "tasks": [str(t) for t in tasks],
            "obs_mode": obs_mode,
            "image_size": int(image_size),
            "camera": camera,
            "render_size": render_size,
            "reward": reward,
            "terminate_on_success": terminate_on_success,
            "reset_on_success": reset_on_success,
            "max_episode_steps": max_episode_steps,
            "render_mode": render_mode,
        }
        self.suite = suite
        self.tasks = [suite_task(suite, resolve_task(suite, str(t))) for t in tasks]
        self.obs_mode = obs_mode
        self.image_size = int(image_size)
        self.camera = camera
        self.render_size = int(render_size or image_size)
        self.reward_mode = reward
        self.terminate_on_success = terminate_on_success
        self.reset_on_success = reset_on_success
        self.render_mode = render_mode
        self.max_episode_steps = int(max_episode_steps or SUITE_EPISODE_STEPS[suite])
        self._state_dim = state_size(self.tasks) if obs_mode == "state" else PROPRIO_SIZE
        self.action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)
        self.observation_space = observation_space(obs_mode, self._state_dim, self.image_size)
        self._sims: OrderedDict[int, Any] = OrderedDict()
        self._init_replay()
        self._task_pos = 0
        self._init_index = 0
        self._raw: dict[str, Any] | None = None
        self._succeeded = False

    # -- properties ------------------------------------------------------------------------

    @property
    def task(self) -> str:
        """LIBERO's name of the task of the current episode."""
        return self.tasks[self._task_pos].name

    @property
    def instruction(self) -> str:
        """The language instruction of the current episode's task."""
        return self.tasks[self._task_pos].instruction

    @property
    def init_state_index(self) -> int:
        """Which of the task's fixed initial states the current episode started from."""
        return self._init_index

    # -- gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode: task and initial state from the seed (module docstring).

        Args:
            seed: Reset seed; None draws from the generator of the last seeded reset.
            options: Not used (accepted for the gymnasium API).
        """
        episode_seed = self._episode_seed_for(seed)
        n = len(self.tasks)
        self._task_pos = episode_seed % n
        task = self.tasks[self._task_pos]
        states = init_states(task.suite, task.index)
        self._init_index = (episode_seed // n) % len(states)
        sim = self._sim()
        sim.seed(episode_seed % SEED_RANGE)
        sim.reset()
        for robot in sim.robots:
            # the gripper's last command outlives a soft reset (a hard one rebuilds it): the
            # next episode would close the fingers differently than in a new env
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        self._raw = sim.set_init_state(np.array(states[self._init_index]))
        self._start_episode(episode_seed)
        self._succeeded = False
        return self._observation(), self._info(False)

    def step_without_observation(self, action: Any) -> tuple[float, bool, bool, dict[str, Any]]:
        """:meth:`step` that leaves the observation to :meth:`current_observation`.

        LIBERO makes the observation on every step; the method exists so that
        :class:`~rl_core.envs.action_chunk.ActionChunk` treats every simulator alike.
        """
        self._require_episode("step")
        action = np.clip(np.asarray(action, dtype=np.float32).reshape(7), -1.0, 1.0)
        self._actions.append(action)
        sim = self._sim()
        self._raw, _, _, _ = sim.step(action.astype(np.float64))
        success = bool(sim.check_success())
        first = success and not self._succeeded
        self._succeeded = self._succeeded or success
        terminated = self.terminate_on_success and success
        truncated = len(self._actions) >= self.max_episode_steps or (
            self.reset_on_success and success and not terminated
        )
        return float(first), terminated, truncated, self._info(success)

    def render(self) -> np.ndarray | None:
        """The camera's frame at ``render_size`` (upright), with ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            gym.logger.warn("LiberoEnv.render() needs render_mode='rgb_array'")
            return None
        self._require_episode("render")
        size = self.render_size
        frame = self._sim().sim.render(width=size, height=size, camera_name=self.camera)
        return np.ascontiguousarray(frame[::-1, ::-1], dtype=np.uint8)

    def close(self) -> None:
        """Close the simulators."""
        for sim in getattr(self, "_sims", {}).values():
            sim.close()
        self._sims = OrderedDict()
        super().close()

    # -- internals -----------------------------------------------------------------------

    def _sim(self) -> Any:
        """The simulator of the current task (built when the task changes: ``_MAX_SIMS``)."""
        key = self._task_pos
        if key in self._sims:
            self._sims.move_to_end(key)
            return self._sims[key]
        wrapper = import_libero("libero.libero.envs.env_wrapper")
        cameras = self.obs_mode != "state"
        sim = wrapper.ControlEnv(
            bddl_file_name=self.tasks[key].bddl_file,
            has_renderer=False,
            has_offscreen_renderer=cameras or self.render_mode == "rgb_array",
            use_camera_obs=cameras,
            camera_names=[self.camera],
            camera_heights=self.image_size,
            camera_widths=self.image_size,
            # rlpipe truncates episodes itself; robosuite would raise past its horizon
            ignore_done=True,
            # keep the model between episodes (a hard reset rebuilds it: ~2 s); the initial
            # state is set in full after every reset
            hard_reset=False,
        )
        self._sims[key] = sim
        while len(self._sims) > _MAX_SIMS:
            self._sims.popitem(last=False)[1].close()
        return sim

    def _observation(self) -> Any:
        assert self._raw is not None
        raw = self._raw
        parts = [
            raw["robot0_eef_pos"],
            quat_to_axis_angle(raw["robot0_eef_quat"]),
            raw["robot0_gripper_qpos"],
        ]
        if self.obs_mode == "state":
            parts.append(raw["object-state"])
        state = np.concatenate(parts).astype(np.float32)
        return observation(self.obs_mode, state, self._camera_image, self.instruction)

    def _camera_image(self) -> np.ndarray:
        assert self._raw is not None
        image = self._raw[f"{self.camera}_image"]
        return np.ascontiguousarray(image[::-1, ::-1], dtype=np.uint8)

    def _info(self, success: bool) -> dict[str, Any]:
        return {"success": float(success), "task": self.task, "instruction": self.instruction}

    # -- pickling: replay from the episode's seed ------------------------------------------
