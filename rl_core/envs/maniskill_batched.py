"""Many ManiSkill3 envs in one simulator: the GPU backend, as a gymnasium vector env.

On a GPU, ManiSkill3 steps hundreds of envs at once in one PhysX scene (``physx_cuda``),
far faster than one process per env. :class:`ManiSkillBatchedEnvs` is that simulator behind
gymnasium's vector API, with the same observations, rewards, action chunks, seeds and
same-step autoreset as envs of :class:`~rl_core.envs.maniskill_env.ManiSkillEnv` side by
side, so an env worker uses either without noticing (``env.vectorization``: ``batched``,
or ``auto`` where the env worker has a GPU).

Seeds. Env ``i`` of ``reset(seed=[s_0, ...])`` starts from ``s_i``; its later episodes draw
their seeds from a generator seeded with ``s_i``, as a :class:`ManiSkillEnv` does. ManiSkill
draws a batched reset's initial states from one torch generator for the whole batch, so
to give every seed its own initial state (and the envs of a GRPO group, which share seeds,
the same one), the envs of one seed are reset alone, seeded with it, and the other envs
with that seed copy its state (``reset_to_env_states``). A reset therefore costs one
simulator reset per distinct seed. With one env on the CPU backend, the envs play exactly
as a :class:`ManiSkillEnv` (tested); on the GPU backend the same seeds give other (but
reproducible) initial states, as ManiSkill's GPU and CPU random streams differ.

Checkpoints. Pickling keeps the simulator's state (``get_state_dict``: poses, velocities,
controller targets, as arrays), the episodes' seeds, steps and successes and the seed
generators; unpickling resets every env to its episode's start and then sets the saved
state. ManiSkill's state restore is off by about 1e-6 after a step and PhysX on the GPU is
not bit-reproducible anyway: a resumed run continues the episodes, within that.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rl_core.envs.manipulation_obs import observation_space
from rl_core.envs.maniskill_env import maniskill_episode_steps, maniskill_instruction
from rl_core.envs.maniskill_sim import (
    DEFAULT_CAMERA,
    DEFAULT_CONTROL_MODE,
    flags,
    make_sim,
    score_steps,
    state_dim,
    to_numpy,
)
from rl_core.envs.replay_pickling import SEED_RANGE

logger = logging.getLogger(__name__)


class ManiSkillBatchedEnvs(VectorEnv):
    """``num_envs`` envs of one ManiSkill3 task in one simulator (module docstring).

    Args:
        num_envs: Envs in the simulator.
        task: ManiSkill3 task id.
        obs_mode: ``state``, ``rgb`` or ``rgb+state``.
        control_mode: ManiSkill's controller.
        image_size: Side of the camera images of the observations.
        camera: Sensor camera of the images.
        reward: ``dense`` or ``success`` (as :class:`ManiSkillEnv`).
        terminate_on_success: End an episode on a successful step.
        reset_on_success: End the episode on a successful step as a time limit does
            (truncated, so the value bootstraps from its final observation).
        max_episode_steps: Steps before an episode is truncated; None: ManiSkill's.
        action_chunk: Actions per step, played in order (as
            :class:`~rl_core.envs.action_chunk.ActionChunk`: rewards add up, an env whose
            episode ends inside the chunk stops there).
        sim_backend: ``physx_cuda[:N]`` (the GPU) or ``physx_cpu`` (one env only).
        render_backend: ManiSkill's renderer; None: the GPU where CUDA exists.

    Raises:
        ValueError: Settings ManiSkill refuses (task, control mode, camera), or several envs
            on the CPU backend.
    """

    def __init__(
        self,
        num_envs: int,
        task: str = "PushCube-v1",
        obs_mode: str = "state",
        control_mode: str = DEFAULT_CONTROL_MODE,
        image_size: int = 64,
        camera: str = DEFAULT_CAMERA,
        reward: str = "dense",
        terminate_on_success: bool = False,
        reset_on_success: bool = False,
        max_episode_steps: int | None = None,
        action_chunk: int = 1,
        sim_backend: str = "physx_cuda",
        render_backend: str | None = None,
    ) -> None:
        if sim_backend.startswith("physx_cpu") and num_envs != 1:
            raise ValueError(
                f"ManiSkill3's CPU backend holds one env per simulator, got num_envs={num_envs}: "
                "batched envs need a GPU (sim_backend physx_cuda)"
            )
        if action_chunk < 1:
            raise ValueError(f"an action chunk needs at least one action, got {action_chunk}")
        self._settings = {
            "num_envs": num_envs,
            "task": task,
            "obs_mode": obs_mode,
            "control_mode": control_mode,
            "image_size": image_size,
            "camera": camera,
            "reward": reward,
            "terminate_on_success": terminate_on_success,
            "reset_on_success": reset_on_success,
            "max_episode_steps": max_episode_steps,
            "action_chunk": action_chunk,
            "sim_backend": sim_backend,
            "render_backend": render_backend,
        }
        self.num_envs = int(num_envs)
        self.obs_mode = obs_mode
        self.camera = camera
        self.reward_mode = reward
        self.terminate_on_success = terminate_on_success
        self.reset_on_success = reset_on_success
        self.chunk = int(action_chunk)
        self.instruction = maniskill_instruction(task)
        self.max_episode_steps = int(max_episode_steps or maniskill_episode_steps(task))
        self.sim = make_sim(
            task,
            obs_mode=obs_mode,
            control_mode=control_mode,
            image_size=image_size,
            camera=camera,
            num_envs=self.num_envs,
            sim_backend=sim_backend,
            render_backend=render_backend,
        )
        action = self.sim.single_action_space
        self._action_low = np.asarray(action.low, np.float32).reshape(-1)
        self._action_high = np.asarray(action.high, np.float32).reshape(-1)
        self.single_action_space = gym.spaces.Box(
            np.tile(self._action_low, self.chunk), np.tile(self._action_high, self.chunk)
        )
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = observation_space(
            obs_mode, state_dim(self.sim), int(image_size)
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self._generators = [np.random.default_rng(0) for _ in range(self.num_envs)]
        self._episode_seeds = np.full(self.num_envs, -1, dtype=np.int64)
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        self._succeeded = np.zeros(self.num_envs, dtype=bool)
        self._raw_obs: Any = None

    # -- gymnasium's vector API ------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start every env's episode.

        Args:
            seed: One seed per env; an int ``s`` seeds env ``i`` with ``s + i``; None draws
                each env's seed from its generator.
            options: Not used (accepted for the gymnasium API).
        """
        if seed is None:
            seeds = [self._next_seed(i) for i in range(self.num_envs)]
        else:
            seeds = (
                [int(seed) + i for i in range(self.num_envs)]
                if isinstance(seed, int)
                else [int(s) for s in seed]
            )
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset needs {self.num_envs} seeds, got {len(seeds)}")
            self._generators = [np.random.default_rng(s) for s in seeds]
        self._start_episodes(np.arange(self.num_envs), seeds)
        return self._observations(), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Play one action chunk in every env; ended episodes restart at once (same step).

        Returns:
            gymnasium's ``(obs, rewards, terminated, truncated, info)``; ``info`` has
            ``success`` (any played step succeeded), and for envs whose episode ended
            ``final_obs`` and ``final_info`` (masked by ``_final_obs`` and ``_final_info``).
        """
        self._require_reset()
        actions = np.asarray(actions, dtype=np.float32).reshape(self.num_envs, self.chunk, -1)
        actions = np.clip(actions, self._action_low, self._action_high)
        n = self.num_envs
        active = np.ones(n, dtype=bool)
        totals = np.zeros(n, dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        chunk_success = np.zeros(n, dtype=bool)
        final_obs = np.empty(n, dtype=object)
        for c in range(self.chunk):
            self._raw_obs, reward, _, _, info = self.sim.step(actions[:, c])
            self._steps[active] += 1
            rewards, ended, cut, succeeded = score_steps(
                to_numpy(reward).reshape(n),
                flags(info, "success", n),
                flags(info, "fail", n),
                self._succeeded,
                self._steps,
                reward_mode=self.reward_mode,
                terminate_on_success=self.terminate_on_success,
                max_episode_steps=self.max_episode_steps,
                reset_on_success=self.reset_on_success,
            )
            totals[active] += rewards[active]
            chunk_success[active] |= flags(info, "success", n)[active]
            self._succeeded[active] = succeeded[active]
            now = active & (ended | cut)
            if now.any():
                terminated[now] = ended[now]
                truncated[now] = cut[now]
                rows = self._observations()
                for i in np.flatnonzero(now):
                    final_obs[i] = _row(rows, i)
                active &= ~now
            if not active.any():
                break
        done = terminated | truncated
        info_out: dict[str, Any] = {
            "success": np.where(done, 0.0, chunk_success.astype(np.float64)),
            "_success": np.ones(n, dtype=bool),
        }
        if done.any():
            info_out["final_obs"] = final_obs
            info_out["_final_obs"] = done.copy()
            info_out["final_info"] = {
                "success": np.where(done, chunk_success.astype(np.float64), 0.0),
                "_success": done.copy(),
            }
            info_out["_final_info"] = done.copy()
            ended_envs = np.flatnonzero(done)
            self._start_episodes(ended_envs, [self._next_seed(i) for i in ended_envs])
        return self._observations(), totals, terminated, truncated, info_out

    def close_extras(self, **kwargs: Any) -> None:
        """Close the simulator."""
        if getattr(self, "sim", None) is not None:
            self.sim.close()
            self.sim = None

    # -- episodes --------------------------------------------------------------------------

    @property
    def episode_seeds(self) -> np.ndarray:
        """The seed each env's running episode started from (-1 before the first reset)."""
        return self._episode_seeds.copy()

    def _next_seed(self, env: int) -> int:
        return int(self._generators[env].integers(SEED_RANGE))

    def _start_episodes(self, envs: np.ndarray, seeds: list[int]) -> None:
        """Reset ``envs`` to the initial states of ``seeds`` (one simulator reset per seed)."""
        torch = _torch()
        by_seed: dict[int, list[int]] = {}
        for env, seed in zip(envs, seeds, strict=True):
            by_seed.setdefault(int(seed), []).append(int(env))
        for seed, members in by_seed.items():
            first = members[0]
            # ManiSkill seeds a batched reset's torch generator with the list's first entry
            listed = np.where(self._episode_seeds < 0, seed, self._episode_seeds)
            listed[first] = seed
            listed[0] = seed
            self._raw_obs, _ = self.sim.reset(
                seed=[int(s) for s in listed],
                options={"env_idx": torch.tensor([first], device=self.sim.device)},
            )
            if len(members) > 1:
                start = _select(self.sim.get_state_dict(), [first] * (len(members) - 1))
                self._raw_obs, _ = self.sim.reset(
                    options={
                        "env_idx": torch.tensor(members[1:], device=self.sim.device),
                        "reset_to_env_states": {"env_states": start},
                    }
                )
            self._episode_seeds[members] = seed
        self._steps[envs] = 0
        self._succeeded[envs] = False

    def _require_reset(self) -> None:
        if self._raw_obs is None:
            raise RuntimeError("call reset() before step()")

    # -- observations ----------------------------------------------------------------------

    def _observations(self) -> Any:
        """The batched observation of the simulator's current state."""
        raw = self._raw_obs if self.obs_mode == "state" else self._raw_obs["state"]
        states = to_numpy(raw).reshape(self.num_envs, -1).astype(np.float32)
        if self.obs_mode == "state":
            return states
        images = to_numpy(self._raw_obs["sensor_data"][self.camera]["rgb"])
        obs: dict[str, Any] = {
            "main_images": np.ascontiguousarray(images, dtype=np.uint8),
            "task_descriptions": tuple([self.instruction] * self.num_envs),
        }
        if self.obs_mode == "rgb+state":
            obs["states"] = states
        return obs

    # -- checkpoints -----------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        self._require_reset()
        return {
            "settings": dict(self._settings),
            "sim_state": _to_arrays(self.sim.get_state_dict()),
            "generators": [g.bit_generator.state for g in self._generators],
            "episode_seeds": self._episode_seeds.copy(),
            "steps": self._steps.copy(),
            "succeeded": self._succeeded.copy(),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["settings"])  # type: ignore[misc]
        seeds = [int(s) for s in state["episode_seeds"]]
        self._start_episodes(np.arange(self.num_envs), seeds)
        self.sim.set_state_dict(_to_tensors(state["sim_state"], self.sim.device))
        self._raw_obs = self.sim.get_obs()
        for generator, saved in zip(self._generators, state["generators"], strict=True):
            generator.bit_generator.state = saved
        self._episode_seeds = np.array(state["episode_seeds"], dtype=np.int64)
        self._steps = np.array(state["steps"], dtype=np.int64)
        self._succeeded = np.array(state["succeeded"], dtype=bool)


def _row(obs: Any, i: int) -> Any:
    """Env ``i``'s observation of a batched observation."""
    if isinstance(obs, dict):
        return {
            k: v[i] if isinstance(v, tuple) else np.array(v[i], copy=True) for k, v in obs.items()
        }
    return np.array(obs[i], copy=True)


def _select(tree: Any, rows: list[int]) -> Any:
    """The ``rows`` of every tensor of a ManiSkill state dict."""
    if isinstance(tree, dict):
        return {k: _select(v, rows) for k, v in tree.items()}
    return tree[rows]


def _to_arrays(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _to_arrays(v) for k, v in tree.items()}
    return to_numpy(tree).copy()


def _to_tensors(tree: Any, device: Any) -> Any:
    torch = _torch()
    if isinstance(tree, dict):
        return {k: _to_tensors(v, device) for k, v in tree.items()}
    return torch.as_tensor(np.asarray(tree), device=device)


def _torch() -> Any:
    import torch

    return torch
