"""Registration of the env type ``maniskill``: its factory and config check.

The env registry (:mod:`rl_core.envs.registry`) imports this module on first use.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
from typing import Any

import gymnasium as gym

from rl_core.envs.manipulation_obs import chunked, refuse_kwargs, refuse_suite
from rl_core.envs.maniskill_env import ManiSkillEnv
from rl_core.envs.maniskill_sim import (
    DEFAULT_CAMERA,
    DEFAULT_CONTROL_MODE,
    INSTALL_HINT,
    maniskill_task_names,
    unknown_task_message,
)
from rl_core.envs.registry import EnvConfigError, register_batched_env, register_env

VULKAN_HINT = (
    "ManiSkill3 needs a Vulkan driver, even for state observations; without a GPU install "
    "Mesa 25's CPU driver (lavapipe): bash scripts/setup_vulkan.sh"
)


def vulkan_driver_present() -> bool:
    """Whether a Vulkan loader and at least one driver (ICD) are installed."""
    if ctypes.util.find_library("vulkan") is None:
        return False
    folders = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
    listed = os.environ.get("VK_ICD_FILENAMES") or os.environ.get("VK_DRIVER_FILES")
    return bool(listed) or any(glob.glob(os.path.join(f, "*.json")) for f in folders)


def make_maniskill_env(env_cfg: Any, render_mode: str | None = None) -> gym.Env:
    """Factory of ``env_type: maniskill`` (settings in ``env.manipulation``)."""
    m = env_cfg.manipulation
    env: gym.Env = ManiSkillEnv(
        task=m.tasks[0],
        obs_mode=m.obs_mode,
        control_mode=m.control_mode or DEFAULT_CONTROL_MODE,
        image_size=m.image_size,
        camera=m.camera or DEFAULT_CAMERA,
        render_size=m.render_size,
        reward=m.reward or "dense",
        terminate_on_success=m.terminate_on_success,
        reset_on_success=m.reset_on_success,
        max_episode_steps=env_cfg.max_episode_steps,
        render_mode=render_mode,
    )
    return chunked(env, m.action_chunk)


def make_maniskill_batched(env_cfg: Any, num_envs: int, device: str) -> gym.vector.VectorEnv:
    """Batched factory of ``env_type: maniskill``: the env worker's envs in one simulator.

    On a CUDA ``device``, ManiSkill3's GPU backend on that GPU; on the CPU only one env
    (ManiSkill's CPU backend holds one per simulator).

    Raises:
        ValueError: Several envs on a CPU device.
    """
    import torch

    from rl_core.envs.maniskill_batched import ManiSkillBatchedEnvs

    torch_device = torch.device(device)
    if torch_device.type == "cuda":
        index = "" if torch_device.index is None else f":{torch_device.index}"
        backends = (f"physx_cuda{index}", f"sapien_cuda{index}")
    elif num_envs == 1:
        backends = ("physx_cpu", None)
    else:
        raise ValueError(
            f"env.vectorization = 'batched' runs ManiSkill3's GPU simulator, but this env "
            f"worker computes on {device}: give env workers GPUs (cluster.component_placement) "
            "or set env.vectorization=sync (one simulator per env on the CPU)"
        )
    m = env_cfg.manipulation
    return ManiSkillBatchedEnvs(
        num_envs,
        task=m.tasks[0],
        obs_mode=m.obs_mode,
        control_mode=m.control_mode or DEFAULT_CONTROL_MODE,
        image_size=m.image_size,
        camera=m.camera or DEFAULT_CAMERA,
        reward=m.reward or "dense",
        terminate_on_success=m.terminate_on_success,
        reset_on_success=m.reset_on_success,
        max_episode_steps=env_cfg.max_episode_steps,
        action_chunk=m.action_chunk,
        sim_backend=backends[0],
        render_backend=backends[1],
    )


def check_maniskill_config(env_cfg: Any) -> None:
    """Config check of ``env_type: maniskill``: ManiSkill3 and Vulkan installed, one task.

    Raises:
        EnvConfigError: Naming the field (``env_type``, ``manipulation.tasks``,
            ``manipulation.tasks.0`` or ``kwargs``).
    """
    m = env_cfg.manipulation
    refuse_kwargs(env_cfg)
    refuse_suite(env_cfg)
    if len(m.tasks) != 1:
        raise EnvConfigError(
            ("manipulation", "tasks"),
            m.tasks,
            "env_type maniskill plays one task per run (its tasks differ in state size); "
            "list exactly one, e.g. [PushCube-v1]",
        )
    if not m.fast_render:
        raise EnvConfigError(
            ("manipulation", "fast_render"),
            m.fast_render,
            "fast_render is a Meta-World setting; env_type maniskill takes only true",
        )
    try:
        known = maniskill_task_names()
    except ImportError:
        raise EnvConfigError(
            ("env_type",), env_cfg.env_type, f"env_type maniskill needs ManiSkill3: {INSTALL_HINT}"
        ) from None
    if m.tasks[0] not in known:
        raise EnvConfigError(
            ("manipulation", "tasks", 0), m.tasks[0], unknown_task_message(m.tasks[0], known)
        )
    if not vulkan_driver_present():
        raise EnvConfigError(("env_type",), env_cfg.env_type, VULKAN_HINT)


register_env("maniskill", make_maniskill_env, check=check_maniskill_config)
register_batched_env("maniskill", make_maniskill_batched)
