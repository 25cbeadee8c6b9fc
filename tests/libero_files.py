"""LIBERO demonstration files written in LIBERO's layout (robomimic's HDF5), for tests."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

INSTRUCTION = "put the black bowl on the plate"


def frames(steps: int, size: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (steps, size, size, 3), dtype=np.uint8)


def write_libero(path: Path, lengths: tuple[int, ...] = (5, 3), size: int = 16) -> Path:
    """A file in LIBERO's layout; demo ``i`` succeeds at its last step."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["problem_info"] = json.dumps(
            {"problem_name": "libero_tabletop_manipulation", "language_instruction": INSTRUCTION}
        )
        data.attrs["env_args"] = json.dumps({"env_name": "Libero_Tabletop_Manipulation"})
        for i, steps in enumerate(lengths):
            demo = data.create_group(f"demo_{i}")
            demo.create_dataset("actions", data=np.full((steps, 7), 0.1 * (i + 1)))
            rewards = np.zeros(steps)
            rewards[-1] = 1
            demo.create_dataset("rewards", data=rewards.astype(np.uint8))
            demo.create_dataset("dones", data=rewards.astype(np.uint8))
            demo.create_dataset("states", data=np.zeros((steps, 79)))
            obs = demo.create_group("obs")
            obs.create_dataset("agentview_rgb", data=frames(steps, size, seed=i))
            obs.create_dataset("eye_in_hand_rgb", data=frames(steps, size, seed=10 + i))
            obs.create_dataset("ee_states", data=np.arange(steps * 6).reshape(steps, 6) / 10)
            obs.create_dataset("gripper_states", data=np.ones((steps, 2)) * 0.04)
            obs.create_dataset("joint_states", data=np.zeros((steps, 7)))
    return path
