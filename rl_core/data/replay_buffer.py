"""Transitions of control episodes: from rollout batches, in a replay buffer, in files.

A transition is ``(states, actions, rewards, next_states, terminated)``: flat
observations ``[D]``, the model's actions ``[A]`` (``[-1, 1]`` for :mod:`mlp_sac
<rl_core.models.sac_policy>`), the reward, the observation after the step (the final
observation when an episode was truncated) and whether the episode ended there (a
terminal state: no bootstrapping). Arrays are float32, one row per transition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

#: Arrays of a set of transitions, all with the same number of rows.
TRANSITION_KEYS = ("states", "actions", "rewards", "next_states", "terminated")


class TransitionFileError(ValueError):
    """An offline-data file that cannot be used (missing, malformed, wrong shapes)."""


def transitions_from_batch(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """Flatten a time-major rollout batch into transitions (rows ordered step by step).

    Args:
        batch: A batch as env workers return it (``rl_core.data.batch``); its
            ``forward_inputs`` must hold ``states`` and ``actions`` ``[T, N, ...]``.

    Returns:
        The :data:`TRANSITION_KEYS` arrays with ``T * N`` rows.
    """
    inputs = batch["forward_inputs"]
    if "actions" not in inputs or "states" not in inputs:
        raise ValueError(
            "off-policy training needs forward_inputs 'states' and 'actions' from the policy "
            f"(got {sorted(inputs)}); use model.model_type mlp_sac or a model that caches them"
        )
    states = np.asarray(inputs["states"], dtype=np.float32)
    steps, envs = states.shape[:2]
    next_states = np.empty_like(states)
    next_states[:-1] = states[1:]
    next_states[-1] = np.asarray(batch["next_obs"]["states"], dtype=np.float32)
    index = np.asarray(batch["trunc_index"], dtype=np.int64).reshape(-1, 2)
    if len(index):  # the env reset after a truncation: bootstrap from the final observation
        final = np.asarray(batch["trunc_obs"]["states"], dtype=np.float32)
        next_states[index[:, 0], index[:, 1]] = final
    rows = steps * envs
    return {
        "states": states.reshape(rows, -1),
        "actions": np.asarray(inputs["actions"], dtype=np.float32).reshape(rows, -1),
        "rewards": np.asarray(batch["rewards"], dtype=np.float32).reshape(rows),
        "next_states": next_states.reshape(rows, -1),
        "terminated": np.asarray(batch["terminated"], dtype=np.float32).reshape(rows),
    }


def check_transitions(data: dict[str, Any], what: str) -> dict[str, np.ndarray]:
    """Validate a set of transitions; returns them as float32 arrays.

    Raises:
        TransitionFileError: A key is missing, row counts differ, or values are not finite.
    """
    missing = [k for k in TRANSITION_KEYS if k not in data]
    if missing:
        raise TransitionFileError(
            f"{what}: missing arrays {missing} (needs {list(TRANSITION_KEYS)})"
        )
    out = {k: np.asarray(data[k], dtype=np.float32) for k in TRANSITION_KEYS}
    rows = {k: v.shape[0] if v.ndim else -1 for k, v in out.items()}
    if len(set(rows.values())) != 1 or rows["states"] < 1:
        raise TransitionFileError(
            f"{what}: arrays must have the same number (> 0) of rows, got {rows}"
        )
    if out["states"].shape != out["next_states"].shape:
        raise TransitionFileError(
            f"{what}: states {out['states'].shape} and next_states "
            f"{out['next_states'].shape} differ in shape"
        )
    for key, value in out.items():
        if not np.isfinite(value).all():
            raise TransitionFileError(f"{what}: {key} holds inf or NaN")
    return out


def save_transitions(data: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write transitions as a safetensors file (loading it cannot run code)."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = check_transitions(data, str(path))
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(tmp))
    tmp.replace(path)
    return path


def load_transitions(path: str | Path) -> dict[str, np.ndarray]:
    """Read and validate a transitions file written by :func:`save_transitions`.

    Raises:
        TransitionFileError: The file is missing or not a valid transitions file.
    """
    from safetensors.numpy import load_file

    path = Path(path)
    if not path.is_file():
        raise TransitionFileError(f"offline data file {str(path)!r} does not exist")
    try:
        data = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure means a bad file
        raise TransitionFileError(f"{path} is not a safetensors transitions file: {exc}") from None
    return check_transitions(data, str(path))


class ReplayBuffer:
    """A ring buffer of transitions with reproducible uniform sampling.

    Args:
        capacity: Most transitions kept; the oldest are overwritten first.
        seed: Seed of the sampling stream (a ``torch.Generator``, checkpointable).
    """

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = int(capacity)
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0
        self.pos = 0
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, data: dict[str, np.ndarray]) -> int:
        """Append transitions (overwriting the oldest when full); returns the new size."""
        rows = int(data["rewards"].shape[0])
        if not self.arrays:
            self.arrays = {
                k: np.zeros((self.capacity, *np.asarray(v).shape[1:]), dtype=np.float32)
                for k, v in data.items()
                if k in TRANSITION_KEYS
            }
        if rows > self.capacity:  # only the newest rows fit
            data = {k: np.asarray(v)[-self.capacity :] for k, v in data.items()}
            rows = self.capacity
        index = (self.pos + np.arange(rows)) % self.capacity
        for key, array in self.arrays.items():
            array[index] = data[key]
        self.pos = int((self.pos + rows) % self.capacity)
        self.size = min(self.size + rows, self.capacity)
        return self.size

    def sample_indices(self, count: int) -> np.ndarray:
        """``count`` row indices drawn uniformly (with replacement) from the stored rows."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return torch.randint(0, self.size, (count,), generator=self.generator).numpy()

    def take(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The transitions at ``index`` (any shape of indices; rows keep that shape)."""
        return {k: v[index] for k, v in self.arrays.items()}

    def state_dict(self) -> dict[str, Any]:
        """Contents (stored rows only), write position and sampling state."""
        return {
            "arrays": {k: v[: self.size].copy() for k, v in self.arrays.items()},
            "capacity": self.capacity,
            "size": self.size,
            "pos": self.pos,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the capacity must match)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"the saved replay buffer holds {state['capacity']} transitions, this run's "
                f"replay.capacity is {self.capacity}; set it back to resume"
            )
        self.size, self.pos = int(state["size"]), int(state["pos"])
        self.arrays = {}
        for key, rows in state["arrays"].items():
            array = np.zeros((self.capacity, *rows.shape[1:]), dtype=np.float32)
            array[: self.size] = rows
            self.arrays[key] = array
        self.generator.set_state(state["generator"])
