"""Meta-World's 50 manipulation tasks as the env type ``metaworld`` (``env.manipulation``).

Meta-World (``pip install 'rlpipe[metaworld]'``) is imported when an env is made or a config
with ``env_type: metaworld`` is validated, never when this module is imported.

Tasks and seeds: a reset with seed ``s`` plays task ``tasks[s % len(tasks)]`` in one of the
50 initial states (object and goal positions) Meta-World's ``MT1`` benchmark defines for it,
picked by a generator seeded with ``s``; resets without a seed (autoresets) draw the task
and the initial state from that generator. Envs reset with the same seed (one GRPO group)
play the same task from the same state, and evaluation seeds always give the same ones.

Observations (``obs_mode``):

- ``state``: ``Box(39 [+ len(tasks)],)`` float32: Meta-World's state (hand, gripper, objects,
  the previous frame of them, the goal), with a one-hot of the task when there are several;
- ``rgb``: ``Dict(main_images=Box(0, 255, (S, S, 3), uint8), task_descriptions=Text)``:
  the camera image (upright) and the task's instruction (:func:`metaworld_instruction`);
- ``rgb+state``: both, the state under ``states``.

``info`` of every step and reset: ``success`` (1.0 or 0.0), ``task`` (its name),
``instruction`` and ``state`` (Meta-World's raw 39 numbers, float64, which its scripted
experts read: :func:`metaworld_expert`). The envs pickle (``cloudpickle``) with their
simulator state; stepping a copy gives the same observations and rewards as the original.
"""

from __future__ import annotations

import atexit
import copy
import difflib
import importlib
import logging
import os
import string
import threading
import warnings
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rl_core.envs.action_chunk import ActionChunk
from rl_core.envs.experts import register_expert
from rl_core.envs.registry import EnvConfigError, register_env

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'rlpipe[metaworld]' (in a checkout: bash scripts/setup_venv.sh)"
#: Meta-World's episode length (``max_path_length``), the default of ``env.max_episode_steps``.
MAX_PATH_LENGTH = 500
#: Initial states per task in Meta-World's benchmarks (``MT1(task).train_tasks``).
NUM_VARIATIONS = 50
#: Seed of the ``MT1`` benchmark whose initial states the envs play (the same everywhere).
BENCHMARK_SEED = 0
#: Length of Meta-World's state vector.
STATE_DIM = 39
#: Simulator steps per second of Meta-World (5 physics steps of 2.5 ms per env step).
RENDER_FPS = 80
#: The cameras of every Meta-World scene.
CAMERAS = ("topview", "corner", "corner2", "corner3", "corner4", "behindGripper", "gripperPOV")
#: The camera of the images when ``env.manipulation.camera`` is not set.
DEFAULT_CAMERA = "corner2"
#: Characters of the instructions (the ``Text`` space of ``task_descriptions``).
INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " ,.-'"
MAX_INSTRUCTION_LENGTH = 128

#: Short English instructions of the 50 Meta-World V3 tasks.
INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the nut and place it onto the peg",
    "basketball-v3": "pick up the ball and dunk it into the basket",
    "bin-picking-v3": "pick up the puck from one bin and place it into the other bin",
    "box-close-v3": "pick up the lid and close the box with it",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "reach past the wall and press the button from the top",
    "button-press-v3": "press the button from the side",
    "button-press-wall-v3": "reach past the wall and press the button from the side",
    "coffee-button-v3": "push the button on the coffee machine",
    "coffee-pull-v3": "pull the mug out from under the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "rotate the dial 180 degrees",
    "disassemble-v3": "pick the nut up off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock clockwise",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock counter-clockwise",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "turn the faucet handle counter-clockwise to open it",
    "faucet-close-v3": "turn the faucet handle clockwise to close it",
    "hammer-v3": "pick up the hammer and hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck, move it past the wall and place it at the goal",
    "pick-out-of-hole-v3": "pick the puck up out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate into the cabinet from the side",
    "plate-slide-back-v3": "slide the plate out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate out of the cabinet to the side",
    "peg-insert-side-v3": "pick up the peg and insert it sideways into the hole",
    "peg-unplug-side-v3": "pull the peg out of the hole sideways",
    "soccer-v3": "push the soccer ball into the goal",
    "stick-push-v3": "pick up the stick and push the bottle to the goal with it",
    "stick-pull-v3": "pick up the stick and pull the bottle to the goal with it",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck past the wall to the goal",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal position with the gripper",
    "reach-wall-v3": "reach past the wall to the goal position",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the edge of the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

_BENCHMARK_LOCK = threading.Lock()
_VARIATIONS: dict[str, list[Any]] = {}
#: Attributes of a Meta-World env that are not simulation state.
_NOT_SIM_STATE = ("model", "data", "mujoco_renderer")


def _import(module: str = "metaworld") -> ModuleType:
    """Import ``module`` of Meta-World; the error says how to install it."""
    if not os.environ.get("DISPLAY"):  # MuJoCo reads it at import: render headless
        os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"env_type metaworld needs Meta-World: {INSTALL_HINT} ({exc})") from exc


def metaworld_task_names() -> list[str]:
    """The names of Meta-World's V3 tasks (imports Meta-World)."""
    return list(_import("metaworld.env_dict").ALL_V3_ENVIRONMENTS)


def metaworld_instruction(task: str) -> str:
    """The English instruction of a Meta-World task (``pick-place-v3`` → ``pick up ...``).

    Raises:
        KeyError: Not one of the 50 V3 tasks.
    """
    try:
        return INSTRUCTIONS[task]
    except KeyError:
        raise KeyError(_unknown_task(task, list(INSTRUCTIONS))) from None


def metaworld_expert(task: str) -> Any:
    """Meta-World's scripted expert of ``task``: ``policy.get_action(state) -> action``.

    ``state`` is Meta-World's raw 39-number state (``info["state"]`` or
    :meth:`MetaWorldEnv.state`), not the observation (which may carry a task one-hot).
    """
    policies = _import("metaworld.policies").ENV_POLICY_MAP
    if task not in policies:
        raise KeyError(_unknown_task(task, list(policies)))
    return policies[task]()


def _unknown_task(task: str, known: list[str]) -> str:
    close = difflib.get_close_matches(task, known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"unknown Meta-World task {task!r}{hint} (the {len(known)} V3 tasks are named like "
        "reach-v3, push-v3, pick-place-v3)"
    )


def _variations(task: str) -> list[Any]:
    """The 50 initial states of ``task`` in Meta-World's ``MT1`` benchmark (cached)."""
    with _BENCHMARK_LOCK:
        if task not in _VARIATIONS:
            _VARIATIONS[task] = list(_import().MT1(task, seed=BENCHMARK_SEED).train_tasks)
        return _VARIATIONS[task]


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
        camera: str = "corner2",
        render_size: int | None = None,
        fast_render: bool = True,
        reward: str = "dense",
        terminate_on_success: bool = False,
        max_episode_steps: int = MAX_PATH_LENGTH,
        render_mode: str | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("MetaWorldEnv needs at least one task")
        for task in tasks:
            if task not in INSTRUCTIONS:
                raise ValueError(_unknown_task(task, list(INSTRUCTIONS)))
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
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.observation_space = self._observation_space()
        self._sims: dict[str, Any] = {}
        self._cameras: _Cameras | None = None
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
        states = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)
        if self.obs_mode == "state":
            return states
        spaces: dict[str, gym.spaces.Space] = {
            "main_images": gym.spaces.Box(0, 255, (self.image_size, self.image_size, 3), np.uint8),
            "task_descriptions": gym.spaces.Text(
                MAX_INSTRUCTION_LENGTH, min_length=1, charset=INSTRUCTION_CHARSET
            ),
        }
        if self.obs_mode == "rgb+state":
            spaces["states"] = states
        return gym.spaces.Dict(spaces)

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
        sim.set_task(_variations(self.task)[variation])
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
        truncated = self._steps >= self.max_episode_steps
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
            cls = _import("metaworld.env_dict").ALL_V3_ENVIRONMENTS[task]
            sim = cls(reward_function_version="v2")
            # truncation is ours; Meta-World refuses steps past its own limit
            sim.max_path_length = max(self.max_episode_steps, MAX_PATH_LENGTH)
            vis = sim.model.vis
            if self.fast_render:
                sim.model.light_castshadow[:] = 0
                sim.model.mat_reflectance[:] = 0
                vis.quality.offsamples = 0
                vis.quality.shadowsize = 0  # no shadow map: 64 MB less per task
            size = max(self.image_size, self.render_size)
            vis.global_.offwidth = vis.global_.offheight = size
            self._sims[task] = sim
        return self._sims[task]

    def _observation(self) -> Any:
        assert self._raw is not None
        state = self._raw.astype(np.float32)
        if len(self.tasks) > 1:
            onehot = np.zeros(len(self.tasks), np.float32)
            onehot[self._task_index] = 1.0
            state = np.concatenate([state, onehot])
        if self.obs_mode == "state":
            return state
        self._frame = self._render(self.image_size)
        obs = {"main_images": self._frame, "task_descriptions": self.instruction}
        if self.obs_mode == "rgb+state":
            obs["states"] = state
        return obs

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
            self._cameras = _Cameras()
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

    def _save(self) -> tuple[Any, ...]:
        """What :meth:`_advance` changes: the simulation state and the env's counters."""
        own = (self._raw, self._steps, self._succeeded, self._last_reward)
        return _sim_state(self._sims[self.task]), own

    def _restore(self, saved: tuple[Any, ...]) -> None:
        sim_state, own = saved
        _set_sim_state(self._sims[self.task], sim_state)
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
            current = (self.task, self._variation, _sim_state(self._sims[self.task]))
        state["_current_sim"] = current
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild the current simulator and give it the saved simulation state."""
        current = state.pop("_current_sim")
        self.__dict__.update(state)
        if current is not None:
            task, variation, sim_state = current
            sim = self._sim(task)
            sim.set_task(_variations(task)[variation])
            sim.reset()  # the task's changes to the scene (object and goal positions)
            _set_sim_state(sim, sim_state)


def _sim_state(sim: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """A Meta-World env's simulation state: MuJoCo's integration state and its attributes.

    Attributes that are views of MuJoCo's memory (Meta-World reads some body positions
    through them) are left out: they follow the restored MuJoCo state by themselves.
    """
    import mujoco

    kind = mujoco.mjtState.mjSTATE_INTEGRATION
    physics = np.empty(mujoco.mj_stateSize(sim.model, kind))
    mujoco.mj_getState(sim.model, sim.data, physics, kind)
    attrs = {
        k: v for k, v in sim.__dict__.items() if k not in _NOT_SIM_STATE and not _mujoco_view(v)
    }
    return physics, copy.deepcopy(attrs)


def _set_sim_state(sim: Any, state: tuple[np.ndarray, dict[str, Any]]) -> None:
    """Give ``sim`` a state of :func:`_sim_state` (same task and initial state)."""
    import mujoco

    physics, attrs = state
    sim.__dict__.update(copy.deepcopy(attrs))
    kind = mujoco.mjtState.mjSTATE_INTEGRATION
    mujoco.mj_setState(sim.model, sim.data, physics, kind)
    mujoco.mj_forward(sim.model, sim.data)  # positions of bodies and sites, contacts
    # mj_forward refines the solver's warm start: put the saved one back (the next step
    # starts from it)
    mujoco.mj_setState(sim.model, sim.data, physics, kind)


def _mujoco_view(value: Any) -> bool:
    """Whether ``value`` is a numpy view of MuJoCo's memory (a model or data field)."""
    base = value
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(value, np.ndarray) and base is not value and not isinstance(base, np.ndarray)


class _Cameras:
    """Offscreen rendering of one env's task scenes, in the GL context of the calling thread.

    A MuJoCo render context per task scene (its meshes and textures) in a GL context that
    every env of the thread shares: a GL context per env would cost ~0.3 s and ~80 MB more
    each with a CPU renderer (llvmpipe). A GL context is current in one thread only, and a
    worker may step its envs in another thread than the one that made them (a Ray actor's
    methods run in its thread pool): each thread gets its own render contexts.
    """

    def __init__(self) -> None:
        #: thread id -> (its GL context, render contexts by task)
        self._threads: dict[int, tuple[Any, dict[str, tuple[Any, Any]]]] = {}
        self._finalizer = weakref.finalize(self, _free_thread_contexts, self._threads)
        _LIVE_CAMERAS.add(self)

    def render(self, key: str, model: Any, data: Any, camera: str, size: int) -> np.ndarray:
        """Render ``camera`` of ``model``/``data`` as an upright ``[size, size, 3]`` image."""
        import mujoco

        thread = threading.get_ident()
        if thread not in self._threads:
            self._threads[thread] = (_shared_gl(), {})
        gl, contexts = self._threads[thread]
        gl.make_current()
        if key not in contexts:
            context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
            contexts[key] = (context, mujoco.MjvScene(model, maxgeom=10_000))
        context, scene = contexts[key]
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        cam.fixedcamid = model.camera(camera).id
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, context)
        mujoco.mjv_updateScene(
            model, data, mujoco.MjvOption(), None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
        )
        viewport = mujoco.MjrRect(0, 0, size, size)
        mujoco.mjr_render(viewport, scene, context)
        pixels = np.empty((size, size, 3), np.uint8)
        mujoco.mjr_readPixels(pixels, None, viewport, context)
        # OpenGL rows run bottom-up; a camera whose up axis points down (Meta-World's corner
        # cameras) sees the scene upside down: turn its image by 180 degrees (not a mirror)
        cid = cam.fixedcamid
        upside_down = model.cam_bodyid[cid] == 0 and data.cam_xmat[cid][7] < 0
        return np.ascontiguousarray(pixels[:, ::-1] if upside_down else pixels[::-1])

    def close(self) -> None:
        """Free the render contexts (idempotent); the shared GL context stays."""
        self._finalizer()


#: The GL context of each thread that renders (surfaceless with EGL), shared by its envs.
_GL_CONTEXTS: dict[int, Any] = {}
_GL_LOCK = threading.Lock()
_LIVE_CAMERAS: weakref.WeakSet[_Cameras] = weakref.WeakSet()


def _shared_gl() -> Any:
    """The GL context of the calling thread (made on first use)."""
    from mujoco.gl_context import GLContext

    key = threading.get_ident()
    with _GL_LOCK:
        if key not in _GL_CONTEXTS:
            first = not _GL_CONTEXTS
            _GL_CONTEXTS[key] = GLContext(64, 64)  # envs render into their own buffers
            if first:
                # registered after EGL's own exit hook (the first context registers it), so
                # it runs before EGL is shut down
                atexit.register(_free_all)
            logger.debug("GL context for MuJoCo rendering in thread %d", key)
        return _GL_CONTEXTS[key]


def _free_thread_contexts(threads: dict[int, tuple[Any, dict[str, tuple[Any, Any]]]]) -> None:
    """Free the render contexts of every thread (those of other threads where possible)."""
    for gl, contexts in threads.values():
        _free_contexts(gl, contexts)
    threads.clear()


def _free_contexts(gl: Any, contexts: dict[str, tuple[Any, Any]]) -> None:
    if not contexts:
        return
    try:
        gl.make_current()
        for context, _ in contexts.values():
            context.free()
    except Exception as exc:  # noqa: BLE001 - e.g. the context is current in another thread
        logger.debug("could not free MuJoCo render contexts: %r", exc)
    contexts.clear()


def _free_all() -> None:
    """At exit: free every env's render contexts, then the GL contexts."""
    for cameras in list(_LIVE_CAMERAS):
        cameras.close()
    with _GL_LOCK:
        for gl in _GL_CONTEXTS.values():
            gl.free()
        _GL_CONTEXTS.clear()


# -- rlpipe entry points -------------------------------------------------------------------


def make_metaworld_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Factory of ``env_type: metaworld`` (settings in ``env.manipulation``)."""
    m = env_cfg.manipulation
    env: gym.Env = MetaWorldEnv(
        tasks=m.tasks,
        obs_mode=m.obs_mode,
        image_size=m.image_size,
        camera=m.camera or DEFAULT_CAMERA,
        render_size=m.render_size,
        fast_render=m.fast_render,
        reward=m.reward,
        terminate_on_success=m.terminate_on_success,
        max_episode_steps=env_cfg.max_episode_steps or MAX_PATH_LENGTH,
        render_mode=render_mode,
    )
    if m.action_chunk > 1:
        env = ActionChunk(env, m.action_chunk)
    return env


def check_metaworld_config(env_cfg: Any) -> None:
    """Config check of ``env_type: metaworld``: Meta-World installed, task and camera names.

    Raises:
        EnvConfigError: Naming the field (``env_type``, ``manipulation.tasks.<i>``,
            ``manipulation.camera`` or ``kwargs``).
    """
    m = env_cfg.manipulation
    if env_cfg.kwargs:
        raise EnvConfigError(
            ("kwargs",),
            env_cfg.kwargs,
            "env_type metaworld reads its settings from env.manipulation, not env.kwargs",
        )
    try:
        known = metaworld_task_names()
    except ImportError:
        raise EnvConfigError(
            ("env_type",), env_cfg.env_type, f"env_type metaworld needs Meta-World: {INSTALL_HINT}"
        ) from None
    for i, task in enumerate(m.tasks):
        if task not in known:
            raise EnvConfigError(("manipulation", "tasks", i), task, _unknown_task(task, known))
    if m.control_mode is not None:
        raise EnvConfigError(
            ("manipulation", "control_mode"),
            m.control_mode,
            "Meta-World has one controller (hand motion and gripper): leave control_mode unset",
        )
    if m.camera is not None and m.camera not in CAMERAS:
        raise EnvConfigError(
            ("manipulation", "camera"),
            m.camera,
            f"unknown Meta-World camera {m.camera!r}; allowed: {', '.join(CAMERAS)}",
        )


def play_metaworld_expert(env: gym.Env, obs: Any, info: dict[str, Any]) -> np.ndarray:
    """The scripted expert of ``env_type: metaworld`` (``rlpipe demos``): the env's action.

    Reads the simulator, not ``obs``, so it drives pixel observations too; with action
    chunks it returns a whole chunk (:meth:`MetaWorldEnv.expert_actions`).
    """
    base = env.unwrapped
    if not isinstance(base, MetaWorldEnv):
        raise TypeError(f"the metaworld expert needs a MetaWorldEnv, got {type(base).__name__}")
    count = int(np.prod(env.action_space.shape)) // 4
    return base.expert_actions(count).reshape(-1)


register_env("metaworld", make_metaworld_env, check=check_metaworld_config)
register_expert("metaworld", play_metaworld_expert)
