"""Playing scripted experts to make demonstration episodes (``rlpipe demos``).

The episodes are written with :func:`rl_core.data.demos.write_shard` in the dataset format
that module describes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rl_core.data.demos import Episode


def noise_levels(action_noise: float | Sequence[float], episodes: int) -> list[float]:
    """The action-noise std of each of ``episodes`` episodes (``demos.action_noise``).

    Args:
        action_noise: One std for every episode, or a list whose entries the episodes take
            in turn (episode ``i`` gets ``action_noise[i % len(action_noise)]``).
        episodes: How many episodes.
    """
    if isinstance(action_noise, (int, float)):
        return [float(action_noise)] * episodes
    levels = [float(x) for x in action_noise]
    return [levels[i % len(levels)] for i in range(episodes)]


def split_seeds(seeds: Sequence[int], parts: int) -> list[list[int]]:
    """``seeds`` in ``parts`` contiguous, near-equal slices (empty slices dropped)."""
    size = math.ceil(len(seeds) / max(1, parts))
    return [list(seeds[i : i + size]) for i in range(0, len(seeds), size)]


def play_expert_episodes(
    env_cfg: Any,
    seeds: Sequence[int],
    expert: Any,
    action_noise: float | Sequence[float] = 0.0,
    noise_seed: int = 0,
) -> list[Episode]:
    """Play one episode per reset seed with ``expert`` choosing the actions.

    Args:
        env_cfg: The ``env`` config section (any registered env type).
        seeds: Reset seed of each episode.
        expert: ``expert(env, obs, info) -> action`` (see :mod:`rl_core.envs.experts`).
        action_noise: Standard deviation of Gaussian noise added to each action (clipped
            to the action bounds): mixed-quality data for offline RL. One std for every
            episode, or one per seed.
        noise_seed: Seed of that noise.

    Returns:
        The episodes, in seed order; an observation is recorded with the action taken in it,
        and the observation after the last step as the episode's final observation.

    Raises:
        ValueError: ``action_noise`` lists another number of stds than there are seeds.
    """
    from rl_core.envs.registry import make_single_env

    if not isinstance(action_noise, (int, float)) and len(action_noise) != len(seeds):
        raise ValueError(
            f"action_noise lists {len(action_noise)} stds for {len(seeds)} seeds (one per seed)"
        )
    levels = noise_levels(action_noise, len(seeds))
    env = make_single_env(env_cfg)
    rng = np.random.default_rng(noise_seed)
    space = env.action_space
    episodes = []
    try:
        for seed, noise in zip(seeds, levels, strict=True):
            obs, info = env.reset(seed=int(seed))
            steps: list[tuple[Any, np.ndarray, float]] = []
            success, instruction = False, str(info.get("instruction", ""))
            while True:
                action = np.asarray(expert(env, obs, info), dtype=np.float32)
                if noise > 0:
                    action = action + rng.normal(0.0, noise, action.shape)
                    action = np.clip(action, space.low, space.high).astype(np.float32)
                obs_taken = obs
                obs, reward, terminated, truncated, info = env.step(action)
                steps.append((obs_taken, action, float(reward)))
                success = success or bool(info.get("success", False))
                if terminated or truncated:
                    break
            episode = _episode(steps, int(seed), success, instruction, info, obs)
            episode.terminated, episode.action_noise = bool(terminated), noise
            episodes.append(episode)
    finally:
        env.close()
    return episodes


def _episode(
    steps: list[tuple[Any, np.ndarray, float]],
    seed: int,
    success: bool,
    instruction: str,
    info: dict[str, Any],
    final: Any,
) -> Episode:
    first = steps[0][0]
    if isinstance(first, dict):
        texts = [o["task_descriptions"] for o, _, _ in steps if "task_descriptions" in o]
        instruction = instruction or (str(texts[0]) if texts else "")
        keys = [k for k, v in first.items() if np.asarray(v).dtype.kind not in "USO"]
        observations = {k: np.stack([np.asarray(o[k]) for o, _, _ in steps]) for k in keys}
        final_observation = {k: np.asarray(final[k]) for k in keys}
    else:
        observations = {"states": np.stack([np.asarray(o, np.float32) for o, _, _ in steps])}
        final_observation = {"states": np.asarray(final, np.float32)}
    return Episode(
        observations=observations,
        actions=np.stack([a for _, a, _ in steps]),
        rewards=np.array([r for _, _, r in steps], dtype=np.float32),
        seed=seed,
        success=success,
        instruction=instruction,
        task=str(info.get("task", "")),
        final_observation=final_observation,
    )
