"""Vectorized env adapter: any registered env → batched ``env_obs`` dicts for policies."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rl_core.envs.registry import (
    EnvSpaces,
    has_batched_env,
    make_batched_envs,
    make_single_env,
)

logger = logging.getLogger(__name__)


def obs_to_env_obs(obs: Any, space: gym.Space) -> dict[str, Any]:
    """Convert a batched gymnasium observation to the policy's ``env_obs`` dict.

    Flat ``Box`` observations become ``states`` [B, D] float32; image boxes (uint8, 3 dims)
    become ``main_images``; ``Dict`` spaces keep their keys.
    """
    if isinstance(space, gym.spaces.Dict):  # text (instructions) becomes a numpy str array
        return {k: np.asarray(v) for k, v in obs.items()}
    arr = np.asarray(obs)
    if isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3:
        return {"main_images": arr}
    return {"states": arr.reshape(arr.shape[0], -1).astype(np.float32, copy=False)}


class VectorEnvAdapter:
    """Batched envs with same-step autoreset, episode stats and a saveable state.

    After a step, envs whose episode ended are already reset; the last observation of the
    ended episode is returned as ``final_obs`` (needed to bootstrap truncated episodes).

    Args:
        env_cfg: The ``env`` config section (``env_type``, ``env_id``, ``kwargs``...).
        num_envs: Number of envs.
        seed: Base seed: env ``i`` is reset with ``seed + i // group_size`` the first time.
        group_size: Consecutive envs sharing a reset seed.
        vectorization: ``sync`` (one process), ``async`` (subprocesses), ``batched`` (the
            env type's own vectorization, e.g. ManiSkill3's GPU simulator) or ``auto``
            (:func:`resolve_vectorization`).
        render_mode: Passed to each env (e.g. ``rgb_array`` for videos; not ``batched``).
        device: The torch device of the process holding the envs (``batched`` runs there).
        sleep: How :meth:`step` waits out ``env_cfg.step_latency_ms`` (tests replace it).
    """

    def __init__(
        self,
        env_cfg: Any,
        num_envs: int,
        seed: int,
        group_size: int = 1,
        vectorization: str = "sync",
        render_mode: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        device: str = "cpu",
    ) -> None:
        self.num_envs = num_envs
        self.group_size = group_size
        # a remote simulator or robot: every step of the batch waits one round trip
        self.step_latency_s = float(getattr(env_cfg, "step_latency_ms", 0.0)) / 1000.0
        self._sleep = sleep
        self.vectorization = resolve_vectorization(vectorization, env_cfg.env_type, device)
        self.vec = _vector_env(env_cfg, num_envs, self.vectorization, render_mode, device)
        self.spaces = EnvSpaces(self.vec.single_observation_space, self.vec.single_action_space)
        self._obs: Any = None
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        # envs that report ``info["success"]``: whether the running episode has succeeded
        self._succeeded = np.zeros(num_envs, dtype=bool)
        self._reports_success = False
        self.reset(seed)

    def reset(self, seed: int | list[int]) -> dict[str, Any]:
        """Reset all envs; returns the first ``env_obs``.

        Args:
            seed: Base seed (env ``i`` gets ``seed + i // group_size``) or one seed per env.
        """
        if isinstance(seed, list):
            seeds = [int(s) for s in seed]
        else:
            seeds = [int(seed + i // self.group_size) for i in range(self.num_envs)]
        self._obs, _ = self.vec.reset(seed=seeds)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self._succeeded[:] = False
        return self.observation()

    def observation(self) -> dict[str, Any]:
        """The current batched ``env_obs``."""
        return obs_to_env_obs(self._obs, self.vec.single_observation_space)

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Step all envs.

        Returns:
            Dict with ``env_obs`` (next observations, after autoreset), ``rewards``,
            ``terminated``, ``truncated`` [N], ``final_obs`` (``env_obs`` of the ended
            episodes' last observations, rows of non-ended envs are copies of ``env_obs``)
            and ``episodes`` (``(return, length, success)`` of each episode that ended;
            ``success`` is whether ``info["success"]`` was true at any step of it, or None
            for envs that do not report success).
        """
        if self.step_latency_s > 0:
            self._sleep(self.step_latency_s)
        obs, rewards, terminated, truncated, info = self.vec.step(actions)
        rewards = np.asarray(rewards, dtype=np.float32)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool) & ~terminated
        self._returns += rewards
        self._lengths += 1
        done = terminated | truncated
        self._track_success(info, done)
        final = obs
        episodes: list[tuple[float, int, bool | None]] = []
        if done.any():
            final = _with_final_obs(obs, info, info.get("_final_obs", done))
            for i in np.flatnonzero(done):
                success = bool(self._succeeded[i]) if self._reports_success else None
                episodes.append((float(self._returns[i]), int(self._lengths[i]), success))
                self._returns[i] = 0.0
                self._lengths[i] = 0
                self._succeeded[i] = False
        self._obs = obs
        space = self.vec.single_observation_space
        return {
            "env_obs": obs_to_env_obs(obs, space),
            "rewards": rewards,
            "terminated": terminated,
            "truncated": truncated,
            "final_obs": obs_to_env_obs(final, space),
            "episodes": episodes,
        }

    def _track_success(self, info: dict[str, Any], done: np.ndarray) -> None:
        """OR this step's ``info["success"]`` into the running episodes' success.

        With same-step autoreset, an env whose episode ended reports its last step's info
        under ``final_info`` (its ``success`` is the reset's).
        """
        live = _info_flags(info, done, ~done)
        final = _info_flags(info.get("final_info", {}), done, done)
        if live is None and final is None:
            return
        self._reports_success = True
        for flags in (live, final):
            if flags is not None:
                self._succeeded |= flags

    def get_state(self) -> dict[str, Any] | None:
        """The envs' state, or None if the envs cannot be pickled.

        Returns:
            ``{"envs": bytes, "obs": ..., "returns": ndarray, "lengths": ndarray}``: the
            vector env pickled (the only way to capture an arbitrary env; whoever stores
            these bytes must make sure that only trusted bytes come back to
            :meth:`set_state`), and the current observations and running episode returns
            and lengths as plain arrays.
        """
        try:
            envs = cloudpickle.dumps(self.vec)
        except Exception as exc:  # noqa: BLE001 - any env may refuse pickling
            logger.warning("env state is not picklable (%s); resume will reseed envs", exc)
            return None
        return {
            "envs": envs,
            "obs": self._obs,
            "returns": self._returns.copy(),
            "lengths": self._lengths.copy(),
            "succeeded": self._succeeded.copy(),
            "reports_success": self._reports_success,
        }

    def set_state(self, state: dict[str, Any] | bytes) -> None:
        """Restore a state produced by :meth:`get_state` (unpickles ``state["envs"]``).

        ``bytes`` are the whole-adapter pickle of checkpoints written by older versions.
        """
        old = self.vec
        if isinstance(state, bytes):
            self.vec, self._obs, self._returns, self._lengths = cloudpickle.loads(state)
        else:
            self.vec = cloudpickle.loads(state["envs"])
            self._obs = state["obs"]
            self._returns = np.array(state["returns"], dtype=np.float64)
            self._lengths = np.array(state["lengths"], dtype=np.int64)
            self._succeeded = np.array(state.get("succeeded", np.zeros(self.num_envs)), dtype=bool)
            self._reports_success = bool(state.get("reports_success", False))
        old.close()

    def close(self) -> None:
        """Close the envs."""
        self.vec.close()


def resolve_vectorization(vectorization: str, env_type: str, device: str) -> str:
    """The vectorization a process with ``device`` runs ``env.vectorization`` as.

    ``auto`` stands for ``batched`` where the env type has its own batched simulator and the
    process computes on a GPU, else ``sync``; other values are returned as they are.
    """
    if vectorization != "auto":
        return vectorization
    on_gpu = str(device).startswith("cuda")
    return "batched" if on_gpu and has_batched_env(env_type) else "sync"


def _vector_env(
    env_cfg: Any, num_envs: int, vectorization: str, render_mode: str | None, device: str
) -> gym.vector.VectorEnv:
    if vectorization == "batched":
        if render_mode is not None:
            raise ValueError("batched envs do not render frames; evaluation videos use sync envs")
        return make_batched_envs(env_cfg, num_envs, str(device))
    fns = [lambda: make_single_env(env_cfg, render_mode=render_mode) for _ in range(num_envs)]
    cls = AsyncVectorEnv if vectorization == "async" else SyncVectorEnv
    return cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def _info_flags(info: dict[str, Any], done: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """``info["success"]`` as booleans on ``rows`` (False elsewhere); None if absent."""
    if "success" not in info:
        return None
    values = np.asarray(info["success"]).reshape(-1)
    present = np.asarray(info.get("_success", np.ones_like(done)), dtype=bool).reshape(-1)
    return (values.astype(np.float64) > 0) & present & rows


def _with_final_obs(obs: Any, info: dict[str, Any], mask: np.ndarray) -> Any:
    """``obs`` with the rows of ended episodes replaced by their last observations."""
    rows = np.flatnonzero(mask)
    if isinstance(obs, dict):
        final = {k: np.array(v, copy=True) for k, v in obs.items()}
        for key, values in final.items():
            if values.dtype.kind == "U":  # instructions: room for a longer final text
                final[key] = values = values.astype(object)
            for i in rows:
                values[i] = info["final_obs"][i][key]
            if values.dtype == object:
                final[key] = values.astype(str)
        return final
    final = np.array(obs, copy=True)
    for i in rows:
        final[i] = info["final_obs"][i]
    return final
