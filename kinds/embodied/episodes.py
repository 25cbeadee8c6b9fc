"""Evaluation episodes of a policy given as a numpy state dict (runs in any process)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from infra.cluster.runtime_env import limit_threads
from rl_core.config import validate_config
from rl_core.envs import VectorEnvAdapter
from rl_core.models import get_model


def run_episodes(
    config: dict[str, Any], state_dict: dict[str, np.ndarray], seeds: list[int]
) -> dict[str, Any]:
    """Play one episode per seed and report returns and lengths.

    Args:
        config: Resolved run config (dict).
        state_dict: Policy weights as numpy arrays.
        seeds: Reset seed of each episode.

    Returns:
        ``{"returns": [...], "lengths": [...], "successes": [...], "seconds": float}``;
        ``successes`` (1.0/0.0 per episode: ``info["success"]`` at any step) is empty for
        envs that do not report success.
    """
    from infra.extensions import load_extension_modules

    limit_threads()
    load_extension_modules()
    start = time.perf_counter()
    cfg = validate_config(config, source="evaluation")
    returns: list[float] = []
    lengths: list[int] = []
    successes: list[float] = []
    width = max(1, min(cfg.eval.num_envs, len(seeds)))
    policy = None
    for chunk_start in range(0, len(seeds), width):
        chunk = seeds[chunk_start : chunk_start + width]
        envs = VectorEnvAdapter(cfg.env, len(chunk), seed=0, vectorization="sync")
        if policy is None:
            policy = get_model(cfg.model, envs.spaces)
            policy.load_state_dict(
                {k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()}
            )
            policy.eval()
        envs.reset(chunk)
        r, n, s = _play(envs, policy, cfg.eval.deterministic, cfg.eval.max_steps)
        returns += r
        lengths += n
        successes += s
        envs.close()
    return {
        "returns": returns,
        "lengths": lengths,
        "successes": successes,
        "seconds": time.perf_counter() - start,
    }


@torch.no_grad()
def _play(
    envs: VectorEnvAdapter, policy: Any, deterministic: bool, max_steps: int
) -> tuple[list, list, list]:
    """Play every env's first episode; returns, lengths and successes (if reported)."""
    done = np.zeros(envs.num_envs, dtype=bool)
    success: list[float | None] = [None] * envs.num_envs
    returns = np.zeros(envs.num_envs)
    lengths = np.zeros(envs.num_envs, dtype=np.int64)
    obs = envs.observation()
    generator = torch.Generator().manual_seed(0)
    mode = "eval" if deterministic else "train"
    for _ in range(max_steps):
        actions, _ = policy.predict_action_batch(
            obs, mode=mode, compute_values=False, generator=generator
        )
        out = envs.step(actions)
        live = ~done
        returns[live] += out["rewards"][live]
        lengths[live] += 1
        ended = out["terminated"] | out["truncated"]
        # out["episodes"] lists the ended episodes in env order
        for i, (_, _, succeeded) in zip(np.flatnonzero(ended), out["episodes"], strict=True):
            if live[i] and succeeded is not None:
                success[i] = float(succeeded)
        done |= ended
        if done.all():
            break
        obs = out["env_obs"]
    reported = [s for s in success if s is not None]
    return returns.tolist(), lengths.tolist(), reported
