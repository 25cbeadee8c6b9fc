"""Offline transitions from a policy's episodes (the data RLPD samples half its batches from).

:func:`collect_transitions` plays whole episodes of a policy on fixed reset seeds and
records every step as a transition (``rl_core.data.replay_buffer``): a truncated episode's
last step bootstraps from its final observation, a terminated one does not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rl_core.data.batch import to_numpy_tree
from rl_core.data.replay_buffer import TRANSITION_KEYS
from rl_core.envs import VectorEnvAdapter


@torch.no_grad()
def collect_transitions(
    policy: Any, env_cfg: Any, seeds: list[int], mode: str = "train", sampling_seed: int = 0
) -> tuple[dict[str, np.ndarray], list[float]]:
    """Play one episode per seed with ``policy`` and return its transitions.

    Args:
        policy: A policy whose ``predict_action_batch`` caches ``states`` and ``actions`` in
            ``forward_inputs`` (``mlp_sac``).
        env_cfg: The run config's ``env`` section.
        seeds: Reset seed of each episode (all played at once in one vector env).
        mode: ``train`` samples actions (varied data), ``eval`` takes the mean action.
        sampling_seed: Seed of the action noise.

    Returns:
        ``(transitions, episode returns)``; transitions are ordered step by step.
    """
    envs = VectorEnvAdapter(env_cfg, len(seeds), seed=0, vectorization="sync")
    try:
        obs = envs.reset(list(seeds))
        generator = torch.Generator().manual_seed(sampling_seed)
        live = np.ones(len(seeds), dtype=bool)
        returns = np.zeros(len(seeds))
        rows: dict[str, list[np.ndarray]] = {k: [] for k in TRANSITION_KEYS}
        while live.any():
            actions, result = policy.predict_action_batch(
                obs, mode=mode, compute_values=False, generator=generator
            )
            out = envs.step(actions)
            inputs = to_numpy_tree(result["forward_inputs"])  # from any device
            done = out["terminated"] | out["truncated"]
            step = {
                "states": np.asarray(inputs["states"], dtype=np.float32),
                "actions": np.asarray(inputs["actions"], dtype=np.float32),
                "rewards": out["rewards"],
                "next_states": np.asarray(out["final_obs"]["states"], dtype=np.float32),
                "terminated": out["terminated"].astype(np.float32),
            }
            for key, value in step.items():
                rows[key].append(value[live])
            returns[live] += out["rewards"][live]
            live &= ~done
            obs = out["env_obs"]
        return {k: np.concatenate(v) for k, v in rows.items()}, returns.tolist()
    finally:
        envs.vec.close()
