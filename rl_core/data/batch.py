"""Rollout batch layout shared by env, rollout and actor workers (numpy, time-major)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Keys of a rollout batch. Arrays are [T, N, ...] unless noted.
#:   forward_inputs: dict of arrays [T, N, ...] (the policy's cached training inputs)
#:   prev_logprobs, prev_values, rewards: float32 [T, N]
#:   terminated, truncated: bool [T, N]
#:   trunc_index: int64 [K, 2] (t, n) of truncated steps; trunc_obs: env_obs dict [K, ...]
#:   next_obs: env_obs dict [N, ...] (observation after the last step, for bootstrapping)
BATCH_KEYS = (
    "forward_inputs",
    "prev_logprobs",
    "prev_values",
    "rewards",
    "terminated",
    "truncated",
    "trunc_index",
    "trunc_obs",
    "next_obs",
)


def to_numpy_tree(tree: Any) -> Any:
    """Convert tensors in a nested dict/list to numpy (for cheap Ray transfer)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu().numpy()
    if isinstance(tree, dict):
        return {k: to_numpy_tree(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_numpy_tree(v) for v in tree)
    return tree


def to_torch_tree(tree: Any) -> Any:
    """Convert numpy arrays in a nested dict to tensors (zero-copy where possible).

    Text arrays (such as ``task_descriptions``) stay numpy arrays: the policy reads them.
    """
    if isinstance(tree, np.ndarray) and tree.dtype.kind not in "USO":
        return torch.from_numpy(np.ascontiguousarray(tree))
    if isinstance(tree, dict):
        return {k: to_torch_tree(v) for k, v in tree.items()}
    return tree


def writable_tree(tree: Any) -> Any:
    """Copy read-only arrays (e.g. from Ray's object store) so torch can wrap them."""
    if isinstance(tree, np.ndarray):
        return tree if tree.flags.writeable else tree.copy()
    if isinstance(tree, dict):
        return {k: writable_tree(v) for k, v in tree.items()}
    return tree


def stack_steps(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack a list of per-step dicts (same nested keys) into [T, ...] arrays."""
    first = steps[0]
    out: dict[str, Any] = {}
    for key, value in first.items():
        if isinstance(value, dict):
            out[key] = stack_steps([s[key] for s in steps])
        else:
            out[key] = np.stack([s[key] for s in steps])
    return out


def concat_batches(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Join batches of several env workers along the env axis (N)."""
    if len(batches) == 1:
        return batches[0]
    out: dict[str, Any] = {}
    offset = 0
    idx_parts, obs_parts = [], []
    for b in batches:
        idx = b["trunc_index"].copy()
        idx[:, 1] += offset
        idx_parts.append(idx)
        obs_parts.append(b["trunc_obs"])
        offset += b["rewards"].shape[1]
    out["trunc_index"] = np.concatenate(idx_parts)
    out["trunc_obs"] = _concat_tree(obs_parts, axis=0)
    out["next_obs"] = _concat_tree([b["next_obs"] for b in batches], axis=0)
    out["forward_inputs"] = _concat_tree([b["forward_inputs"] for b in batches], axis=1)
    for key in ("prev_logprobs", "prev_values", "rewards", "terminated", "truncated"):
        out[key] = np.concatenate([b[key] for b in batches], axis=1)
    return out


def _concat_tree(trees: list[Any], axis: int) -> Any:
    if isinstance(trees[0], dict):
        return {k: _concat_tree([t[k] for t in trees], axis) for k in trees[0]}
    return np.concatenate(trees, axis=axis)
