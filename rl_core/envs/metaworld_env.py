"""Meta-World's 50 manipulation tasks as the env type ``metaworld`` (``env.manipulation``).

Meta-World (``pip install 'rlpipe[metaworld]'``) is imported when an env is made or a config
with ``env_type: metaworld`` is validated, never when this module is imported. The env type
registers in :mod:`rl_core.envs.metaworld_registration`.

Tasks and seeds: a reset with seed ``s`` plays task ``tasks[s % len(tasks)]`` in one of the
50 initial states (object and goal positions) Meta-World's ``MT1`` benchmark defines for it,
picked by a generator seeded with ``s``; resets without a seed (autoresets) draw the task
and the initial state from that generator. Envs reset with the same seed (one GRPO group)
play the same task from the same state, and evaluation seeds always give the same ones.

Observations (``obs_mode``):

- ``state``: ``Box(39 [+ len(tasks)],)`` float32: Meta-World's state (hand, gripper, objects,
  the previous frame of them, the goal), with a one-hot of the task when there are several;
- ``rgb``: ``Dict(main_images=Box(0, 255, (S, S, 3), uint8), task_descriptions=Text)``:
  the camera image (upright) and the task's instruction
  (:func:`~rl_core.envs.metaworld_instructions.metaworld_instruction`);
- ``rgb+state``: both, the state under ``states``.

``info`` of every step and reset: ``success`` (1.0 or 0.0), ``task`` (its name),
``instruction`` and ``state`` (Meta-World's raw 39 numbers, float64, which its scripted
experts read: :func:`~rl_core.envs.metaworld_benchmark.metaworld_expert`). The envs pickle (``cloudpickle``) with their
simulator state; stepping a copy gives the same observations and rewards as the original.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rl_core.envs.manipulation_obs import observation, observation_space
from rl_core.envs.metaworld_benchmark import (
    MAX_PATH_LENGTH,
    NUM_VARIATIONS,
    metaworld_env_class,
    metaworld_expert,
    task_variations,
)
from rl_core.envs.metaworld_instructions import INSTRUCTIONS, unknown_task_message
from rl_core.envs.mujoco_rendering import OffscreenCameras, apply_render_settings
from rl_core.envs.mujoco_state import SimState, get_sim_state, set_sim_state

#: Length of Meta-World's state vector.
STATE_DIM = 39
#: Simulator steps per second of Meta-World (5 physics steps of 2.5 ms per env step).
RENDER_FPS = 80
#: The cameras of every Meta-World scene.
CAMERAS = ("topview", "corner", "corner2", "corner3", "corner4", "behindGripper", "gripperPOV")
#: The camera of the images when ``env.manipulation.camera`` is not set.
DEFAULT_CAMERA = "corner2"


class MetaWorldEnv(gym.Env):
    """Meta-World tasks with rlpipe's observations, seeding and pickling (module docstring).

    Args:
        tasks: Meta-World task names (one simulator each, made when first played).
        obs_mode: ``state``, ``rgb`` or ``rgb+state``.
        image_size: Side of the camera images of the observations.
        camera: Camera of the images (:data:`CAMERAS`).
        render_size: Side of the frames :meth:`render` returns; None: ``image_size``.
        fast_render: No shadows, reflections or anti-aliasing.
        reward: ``dense`` (Meta-World's shaped reward, 0 to 10) or ``success`` (1.0 on the
            step the task first succeeds in the episode).
        terminate_on_success: End the episode on a successful step.
        reset_on_success: End the episode on a successful step as a time limit does
            (truncated, so the value bootstraps from its final observation).
        max_episode_steps: Steps before the episode is truncated.
        render_mode: None or ``rgb_array``.

    Raises:
        ValueError: Unknown task or camera names, or an unknown mode.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": RENDER_FPS}

    def __init__(
        self,
        tasks: Sequence[str] = ("reach-v3",),
        obs_mode: str = "state",
        image_size: int = 64,
        camera: str = DEFAULT_CAMERA,
        render_size: int | None = None,
        fast_render: bool = True,
        reward: str = "dense",
        terminate_on_success: bool = False,
        reset_on_success: bool = False,
        max_episode_steps: int = MAX_PATH_LENGTH,
        render_mode: str | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("MetaWorldEnv needs at least one task")
        for task in tasks:
            if task not in INSTRUCTIONS:
                raise ValueError(unknown_task_message(task, list(INSTRUCTIONS)))
        for name, value, allowed in (
            ("obs_mode", obs_mode, ("state", "rgb", "rgb+state")),
            ("reward", reward, ("dense", "success")),
            ("camera", camera, CAMERAS),
            ("render_mode", render_mode, (None, "rgb_array")),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        self.tasks = list(tasks)
        self.obs_mode = obs_mode
        self.image_size = int(image_size)
        self.camera = camera
        self.render_size = int(render_size or image_size)
        self.fast_render = fast_render
        self.reward_mode = reward
        self.terminate_on_success = terminate_on_success
        self.reset_on_success = reset_on_success
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.observation_space = self._observation_space()
        self._sims: dict[str, Any] = {}
        self._cameras: OffscreenCameras | None = None
        self._task_index = 0
        self._variation = 0
        self._raw: np.ndarray | None = None
        self._frame: np.ndarray | None = None
        self._steps = 0
        self._succeeded = False
        self._last_reward = 0.0
        self._experts: dict[str, Any] = {}

    # -- spaces and properties -----------------------------------------------------------

    def _observation_space(self) -> gym.spaces.Space:
        dim = STATE_DIM + (len(self.tasks) if len(self.tasks) > 1 else 0)
        return observation_space(self.obs_mode, dim, self.image_size)

    @property
    def task(self) -> str:
        """The task of the current episode."""
        return self.tasks[self._task_index]

    @property
    def variation(self) -> int:
        """Index of the current episode's initial state among the task's 50."""
        return self._variation

    @property
    def instruction(self) -> str:
        """The instruction of the current task."""
        return INSTRUCTIONS[self.task]

    def state(self) -> np.ndarray:
        """Meta-World's raw state (39 numbers, float64): what its scripted experts read."""
        if self._raw is None:
            raise RuntimeError("call reset() first")
        return self._raw.copy()

    # -- gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode (task and initial state from the seed: module docstring).

        Args:
            seed: Reset seed; None draws from the generator of the last seeded reset.
            options: ``{"task": name or index, "variation": 0..49}`` to choose either.
        """
        super().reset(seed=seed)
        rng = self.np_random
        if seed is not None:
            index = int(seed) % len(self.tasks)
        else:
            index = int(rng.integers(len(self.tasks)))
        variation = int(rng.integers(NUM_VARIATIONS))
        options = options or {}
        if "task" in options:
            task = options["task"]
            index = self.tasks.index(task) if isinstance(task, str) else int(task)
        variation = int(options.get("variation", variation)) % NUM_VARIATIONS
        self._task_index, self._variation = index, variation
        sim = self._sim(self.task)
        sim.set_task(task_variations(self.task)[variation])
        raw, _ = sim.reset()
        self._raw = np.asarray(raw, dtype=np.float64)
        self._steps = 0
        self._succeeded = False
        return self.current_observation(), self._info(0.0)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Play one action (4 numbers in [-1, 1]: hand motion xyz, gripper effort)."""
        reward, terminated, truncated, info = self.step_without_observation(action)
        return self.current_observation(), reward, terminated, truncated, info

    def step_without_observation(self, action: Any) -> tuple[float, bool, bool, dict[str, Any]]:
        """:meth:`step` without making the observation (no rendering).

        :class:`~rl_core.envs.action_chunk.ActionChunk` plays all but the last action of a
        chunk this way; :meth:`current_observation` makes the observation afterwards.
        """
        success, first = self._advance(action)
        self._frame = None
        reward = float(first) if self.reward_mode == "success" else self._last_reward
        terminated = bool(self.terminate_on_success and success)
        truncated = self._steps >= self.max_episode_steps or (
            self.reset_on_success and success and not terminated
        )
        return reward, terminated, truncated, self._info(float(success))

    def current_observation(self) -> Any:
        """The observation of the current simulator state (renders in the rgb modes)."""
        return self._observation()

    def _advance(self, action: Any) -> tuple[bool, bool]:
        """Step the simulator; returns ``(success, first success of the episode)``."""
        if self._raw is None:
            raise RuntimeError("call reset() before step()")
        action = np.clip(np.asarray(action, dtype=np.float32).reshape(4), -1.0, 1.0)
        raw, reward, _, _, info = self._sims[self.task].step(action)
        self._raw = np.asarray(raw, dtype=np.float64)
        self._last_reward = float(reward)
        self._steps += 1
        success = bool(info["success"])
        first = success and not self._succeeded
        self._succeeded = self._succeeded or success
        return success, first

    def render(self) -> np.ndarray | None:
        """The camera frame (upright) at ``render_size``, with ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            gym.logger.warn("MetaWorldEnv.render() needs render_mode='rgb_array'")
            return None
        if self._raw is None:
            raise RuntimeError("call reset() before render()")
        if self._frame is not None and self.render_size == self.image_size:
            return self._frame.copy()  # the observation's image of this step
        return self._render(self.render_size)

    def close(self) -> None:
        """Free the renderer's GL context and the simulators."""
        if self._cameras is not None:
            self._cameras.close()
            self._cameras = None
        for sim in self._sims.values():
            sim.close()
        self._sims.clear()
        super().close()

    # -- internals -----------------------------------------------------------------------

    def _sim(self, task: str) -> Any:
        """The Meta-World env of ``task`` (made on first use)."""
        if task not in self._sims:
            sim = metaworld_env_class(task)(reward_function_version="v2")
            # truncation is ours; Meta-World refuses steps past its own limit
            sim.max_path_length = max(self.max_episode_steps, MAX_PATH_LENGTH)
            frame_size = max(self.image_size, self.render_size)
            apply_render_settings(sim.model, frame_size, self.fast_render)
            self._sims[task] = sim
        return self._sims[task]

    def _observation(self) -> Any:
        assert self._raw is not None
        state = self._raw.astype(np.float32)
        if len(self.tasks) > 1:
            onehot = np.zeros(len(self.tasks), np.float32)
            onehot[self._task_index] = 1.0
            state = np.concatenate([state, onehot])
        return observation(self.obs_mode, state, self._camera_image, self.instruction)

    def _camera_image(self) -> np.ndarray:
        self._frame = self._render(self.image_size)
        return self._frame

    def _info(self, success: float) -> dict[str, Any]:
        assert self._raw is not None
        return {
            "success": success,
            "task": self.task,
            "instruction": self.instruction,
            "state": self._raw.copy(),
        }

    def _render(self, size: int) -> np.ndarray:
        if self._cameras is None:
            self._cameras = OffscreenCameras()
        sim = self._sims[self.task]
        return self._cameras.render(self.task, sim.model, sim.data, self.camera, size)

    # -- scripted expert -----------------------------------------------------------------

    def expert_actions(self, count: int = 1) -> np.ndarray:
        """The scripted expert's next ``count`` actions, ``[count, 4]`` float32.

        For ``count > 1`` (action chunks) the expert plays them on the simulator, which is
        then rewound: the actions are exactly those it would choose step by step. Actions
        past the end of the episode repeat the last one.
        """
        if self.task not in self._experts:
            self._experts[self.task] = metaworld_expert(self.task)
        expert = self._experts[self.task]

        def act() -> np.ndarray:
            assert self._raw is not None
            with warnings.catch_warnings():  # "Constant(s) may be too high": we clip
                warnings.simplefilter("ignore", UserWarning)
                action = expert.get_action(self._raw)
            return np.clip(action, -1.0, 1.0).astype(np.float32)

        if count == 1:
            return act()[None]
        saved = self._save()
        actions = [act()]
        try:
            while len(actions) < count and self._steps < self.max_episode_steps - 1:
                self._advance(actions[-1])
                actions.append(act())
        finally:
            self._restore(saved)
        actions += [actions[-1]] * (count - len(actions))
        return np.stack(actions)

    def _save(self) -> tuple[SimState, tuple[Any, ...]]:
        """What :meth:`_advance` changes: the simulation state and the env's counters."""
        own = (self._raw, self._steps, self._succeeded, self._last_reward)
        return get_sim_state(self._sims[self.task]), own

    def _restore(self, saved: tuple[SimState, tuple[Any, ...]]) -> None:
        sim_state, own = saved
        set_sim_state(self._sims[self.task], sim_state)
        self._raw, self._steps, self._succeeded, self._last_reward = own

    # -- pickling ------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the renderer and the simulators, plus the current simulation state.

        The simulators of other tasks are made again when played (every episode starts with
        a reset); the current one is rebuilt from its task and initial state, then given
        the saved state (a few kB, where pickling MuJoCo's model and data takes 40 MB).
        """
        state = self.__dict__.copy()
        state["_cameras"] = None
        state["_sims"] = {}
        state["_experts"] = {}
        state["_frame"] = None if self._frame is None else self._frame.copy()
        current = None
        if self._raw is not None and self.task in self._sims:
            current = (self.task, self._variation, get_sim_state(self._sims[self.task]))
        state["_current_sim"] = current
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild the current simulator and give it the saved simulation state."""
        current = state.pop("_current_sim")
        state.setdefault("reset_on_success", False)  # envs pickled before the setting
        self.__dict__.update(state)
        if current is not None:
            task, variation, sim_state = current
            sim = self._sim(task)
            sim.set_task(task_variations(task)[variation])
            sim.reset()  # the task's changes to the scene (object and goal positions)
            set_sim_state(sim, sim_state)
