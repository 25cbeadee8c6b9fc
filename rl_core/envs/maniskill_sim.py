"""What ManiSkill3's single env and its batched envs share: the simulator, steps, arrays.

:class:`~rl_core.envs.maniskill_env.ManiSkillEnv` (one env on the CPU physics backend) and
:class:`~rl_core.envs.maniskill_batched.ManiSkillBatchedEnvs` (many envs in one simulator,
ManiSkill's GPU backend) make their simulator, turn its tensors into arrays and score a step
with the functions here, so both play a task alike.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from rl_core.envs.mujoco_rendering import default_to_headless_gl

INSTALL_HINT = "pip install 'rlpipe[maniskill]' (in a checkout: bash scripts/setup_venv.sh)"
#: The camera of ManiSkill's table-top tasks.
DEFAULT_CAMERA = "base_camera"
#: The control mode of ManiSkill's table-top tasks rlpipe uses when none is set: the
#: tool's position moves by up to 10 cm a step (3 numbers) and the gripper opens or closes.
DEFAULT_CONTROL_MODE = "pd_ee_delta_pos"
#: ManiSkill's CPU physics backend (one env per simulator).
CPU_BACKEND = "physx_cpu"


def import_maniskill(module: str = "mani_skill.envs") -> Any:
    """Import a ManiSkill3 module (registering its tasks), naming the extra when missing."""
    default_to_headless_gl()  # ManiSkill imports MuJoCo (pytorch_kinematics)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"env_type maniskill needs ManiSkill3: {INSTALL_HINT}") from exc


def maniskill_task_names() -> list[str]:
    """Ids of every registered ManiSkill3 task (imports ManiSkill)."""
    import_maniskill()
    registration = importlib.import_module("mani_skill.utils.registration")
    return sorted(registration.REGISTERED_ENVS)


def unknown_task_message(task: str, known: list[str]) -> str:
    """The error message of an unknown task id, with the closest known ids."""
    close = difflib.get_close_matches(task, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown ManiSkill3 task {task!r}{hint} (ids such as PushCube-v1, PickCube-v1)"


def make_sim(
    task: str,
    *,
    obs_mode: str,
    control_mode: str,
    image_size: int,
    camera: str,
    num_envs: int = 1,
    sim_backend: str = CPU_BACKEND,
    render_backend: str | None = None,
    render_size: int | None = None,
) -> Any:
    """ManiSkill3's simulator of ``task`` (unwrapped), with rlpipe's observation settings.

    Args:
        task: Task id.
        obs_mode: rlpipe's ``state``, ``rgb`` or ``rgb+state`` (ManiSkill makes ``state`` or
            ``rgb+state``).
        control_mode: ManiSkill's controller.
        image_size: Side of the sensor cameras' images.
        camera: The camera rlpipe's images come from (checked to exist).
        num_envs: Envs in the simulator (more than one needs a GPU backend).
        sim_backend: ``physx_cpu`` or ``physx_cuda[:N]``.
        render_backend: ManiSkill's renderer; None: the GPU where CUDA exists, else the CPU.
        render_size: Side of :meth:`render`'s frames; None: no render camera.

    Raises:
        ValueError: An unknown task, a control mode or camera the task does not have.
    """
    import_maniskill()
    kwargs: dict[str, Any] = {
        "obs_mode": "state" if obs_mode == "state" else "rgb+state",
        "control_mode": control_mode,
        "reward_mode": "normalized_dense",
        "sim_backend": sim_backend,
        # the GPU renderer where there is one (else ManiSkill warns and falls back)
        "render_backend": render_backend or ("gpu" if has_cuda() else "cpu"),
        "num_envs": num_envs,
        "sensor_configs": {"width": image_size, "height": image_size},
    }
    if render_size is not None:
        kwargs["render_mode"] = "rgb_array"
        kwargs["human_render_camera_configs"] = {"width": render_size, "height": render_size}
    try:
        sim = gym.make(task, **kwargs).unwrapped
    except gym.error.Error as exc:
        raise ValueError(unknown_task_message(task, maniskill_task_names())) from exc
    except AssertionError as exc:  # ManiSkill asserts on unknown control modes
        raise ValueError(
            f"ManiSkill3 task {task} refused control_mode {control_mode!r}: {exc}"
        ) from exc
    if obs_mode != "state":
        cameras = list(sim._sensors)  # noqa: SLF001 - ManiSkill's sensor table
        if camera not in cameras:
            sim.close()
            raise ValueError(
                f"ManiSkill3 task {task} has no camera {camera!r}; allowed: {', '.join(cameras)}"
            )
    return sim


def state_dim(sim: Any) -> int:
    """Length of one env's flat state vector."""
    space = sim.single_observation_space
    if isinstance(space, gym.spaces.Dict):
        space = space["state"]
    return int(space.shape[-1])


def score_steps(
    reward: np.ndarray,
    success: np.ndarray,
    fail: np.ndarray,
    succeeded: np.ndarray,
    steps: np.ndarray,
    *,
    reward_mode: str,
    terminate_on_success: bool,
    max_episode_steps: int,
    reset_on_success: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rewards and episode ends of one simulator step of a batch of envs.

    Args:
        reward: ManiSkill's normalized dense reward [N].
        success: Whether each env succeeds at this step [N].
        fail: ManiSkill's failure flags [N].
        succeeded: Whether each episode had succeeded before this step [N].
        steps: Steps each episode has played, this one included [N].
        reward_mode: ``dense`` or ``success`` (1.0 on an episode's first successful step).
        terminate_on_success: A successful step ends the episode.
        max_episode_steps: Episode length before truncation.
        reset_on_success: A successful step truncates the episode (a new one starts).

    Returns:
        ``(rewards, terminated, truncated, succeeded)``: float32 rewards, the two end flags
        (``truncated`` is false where ``terminated``) and the episodes' success so far.
    """
    success = np.asarray(success, dtype=bool)
    first = success & ~succeeded
    if reward_mode == "success":
        rewards = first.astype(np.float32)
    else:
        rewards = np.asarray(reward, dtype=np.float32)
    terminated = np.asarray(fail, dtype=bool) | (terminate_on_success & success)
    cut = (np.asarray(steps) >= max_episode_steps) | (reset_on_success & success)
    truncated = cut & ~terminated
    return rewards, terminated, truncated, succeeded | success


def to_numpy(value: Any) -> np.ndarray:
    """A ManiSkill tensor (or array) as a numpy array."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def flags(info: dict[str, Any], key: str, num_envs: int) -> np.ndarray:
    """ManiSkill's boolean ``info[key]`` of every env (all false when absent)."""
    if key not in info:
        return np.zeros(num_envs, dtype=bool)
    return to_numpy(info[key]).reshape(num_envs).astype(bool)


def has_cuda() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return bool(torch.cuda.is_available())
