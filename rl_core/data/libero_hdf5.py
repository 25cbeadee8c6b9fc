"""LIBERO's demonstration files (HDF5, robomimic's layout) read as rlpipe episodes.

LIBERO ships its human demonstrations as one HDF5 file per task
(``<task name>_demo.hdf5``, 50 demonstrations each)::

    data                      attrs: problem_info (JSON: "language_instruction", ...)
    data/demo_0/actions       [T, 7] float, in [-1, 1] (end-effector deltas, gripper)
    data/demo_0/rewards       [T]    (1 at the step that succeeds)
    data/demo_0/dones         [T]
    data/demo_0/obs/agentview_rgb      [T, H, W, 3] uint8, upside down
    data/demo_0/obs/ee_states          [T, 6]  end-effector position and axis-angle
    data/demo_0/obs/gripper_states     [T, 2]  gripper joint positions
    ...

An episode becomes what the ``libero`` env type observes: ``main_images`` (the agent-view
camera turned upright and resized to the env's ``image_size``), ``states`` (the 8 numbers
the env gives in ``rgb+state``: end-effector position, axis-angle, gripper positions) and
the instruction. HDF5 holds arrays only: reading a file runs no code (object and
variable-length arrays are refused).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rl_core.data.demos import DemosError, Episode

logger = logging.getLogger(__name__)

#: The observation keys an episode needs per ``env.manipulation.obs_mode``.
NEEDED_KEYS = {
    "rgb": ("agentview_rgb",),
    "rgb+state": ("agentview_rgb", "ee_states", "gripper_states"),
}
ACTION_DIM = 7


def libero_files(path: str | Path) -> list[Path]:
    """The LIBERO demonstration files at ``path``: the file itself, or a folder's ``*.hdf5``.

    Raises:
        DemosError: Nothing there, or a folder without ``.hdf5`` files.
    """
    where = Path(path).expanduser()
    if where.is_file():
        return [where]
    if where.is_dir():
        files = sorted(where.glob("*.hdf5"))
        if files:
            return files
        raise DemosError(f"demos.import_from: no .hdf5 file in the folder {where}")
    raise DemosError(f"demos.import_from: no such file or folder: {where}")


def task_name(path: Path) -> str:
    """The task of a LIBERO file, from its name (``<task>_demo.hdf5``)."""
    stem = path.stem
    return stem[: -len("_demo")] if stem.endswith("_demo") else stem


def read_libero_file(
    path: str | Path, obs_mode: str, image_size: int, first_seed: int = 0, action_chunk: int = 1
) -> Iterator[Episode]:
    """The episodes of one LIBERO demonstration file, one at a time (bounded memory).

    Args:
        path: The ``.hdf5`` file.
        obs_mode: The env's ``env.manipulation.obs_mode``: ``rgb`` or ``rgb+state`` (the
            files hold no object poses, so ``state`` cannot be made from them).
        image_size: The env's square image size; the camera is resized to it.
        first_seed: The ``seed`` recorded for the first demonstration (then counting up):
            LIBERO's demonstrations have no reset seed.
        action_chunk: The env's ``env.manipulation.action_chunk``: every ``action_chunk``
            steps become one env step (see :func:`chunk_episode`).

    Yields:
        One :class:`Episode` per ``data/demo_*`` group, in the order of their numbers.

    Raises:
        DemosError: The file is not in LIBERO's layout; the message names what is missing
            or malformed and the file.
    """
    import h5py  # a dependency of the project; imported where used

    if obs_mode not in NEEDED_KEYS:
        raise DemosError(
            f"LIBERO's demonstration files hold camera images and robot states, not object "
            f"poses: env.manipulation.obs_mode must be 'rgb' or 'rgb+state', got {obs_mode!r}"
        )
    file = Path(path)
    try:
        handle = h5py.File(file, "r")
    except OSError as exc:
        raise DemosError(f"{file}: not an HDF5 file ({exc})") from exc
    with handle:
        data = handle.get("data")
        if not isinstance(data, h5py.Group):
            raise DemosError(f"{file}: no 'data' group (not a LIBERO demonstration file)")
        instruction = _instruction(data, file)
        names = sorted(
            (k for k in data if k.startswith("demo_") and k[5:].isdigit()),
            key=lambda k: int(k[5:]),
        )
        if not names:
            raise DemosError(f"{file}: no data/demo_<n> groups")
        for offset, name in enumerate(names):
            episode = _episode(
                data[name], f"{file}:data/{name}", obs_mode, image_size, instruction,
                task_name(file), first_seed + offset,
            )  # fmt: skip
            yield chunk_episode(episode, action_chunk)


def _instruction(data: object, file: Path) -> str:
    raw = getattr(data, "attrs", {}).get("problem_info")
    if raw is None:
        raise DemosError(f"{file}: data has no 'problem_info' attribute (the instruction)")
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    try:
        info = json.loads(str(raw))
        return str(info["language_instruction"]).strip()
    except (ValueError, KeyError, TypeError) as exc:
        raise DemosError(
            f"{file}: data.attrs['problem_info'] is not JSON with a 'language_instruction'"
        ) from exc


def _array(group: object, key: str, where: str) -> np.ndarray:
    import h5py

    item = group.get(key) if isinstance(group, h5py.Group) else None
    if not isinstance(item, h5py.Dataset):
        raise DemosError(f"{where}: missing dataset '{key}'")
    if item.dtype.kind not in "biuf":  # no objects, strings or references
        raise DemosError(f"{where}/{key}: numeric data expected, got dtype {item.dtype}")
    return np.asarray(item[()])


def _episode(
    group: object,
    where: str,
    obs_mode: str,
    image_size: int,
    instruction: str,
    task: str,
    seed: int,
) -> Episode:
    import h5py

    actions = _array(group, "actions", where).astype(np.float32)
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or len(actions) == 0:
        raise DemosError(f"{where}/actions: shape [T, {ACTION_DIM}] expected, got {actions.shape}")
    if not np.isfinite(actions).all():
        raise DemosError(f"{where}/actions: not all finite")
    steps = len(actions)
    obs_group = group.get("obs") if isinstance(group, h5py.Group) else None
    if not isinstance(obs_group, h5py.Group):
        raise DemosError(f"{where}: missing group 'obs'")
    obs = {key: _array(obs_group, key, f"{where}/obs") for key in NEEDED_KEYS[obs_mode]}
    for key, value in obs.items():
        if len(value) != steps:
            raise DemosError(f"{where}/obs/{key}: {len(value)} steps, but {steps} actions")
    observations = {"main_images": upright_images(obs["agentview_rgb"], image_size, where)}
    if obs_mode == "rgb+state":
        ee, gripper = obs["ee_states"], obs["gripper_states"]
        if ee.shape[1:] != (6,) or gripper.shape[1:] != (2,):
            raise DemosError(
                f"{where}/obs: ee_states [T, 6] and gripper_states [T, 2] expected, got "
                f"{list(ee.shape)} and {list(gripper.shape)}"
            )
        observations["states"] = np.concatenate([ee, gripper], axis=1).astype(np.float32)
    rewards = _optional(group, "rewards", steps, where)
    dones = _optional(group, "dones", steps, where)
    success = bool(rewards.any() or dones.any())
    return Episode(
        observations=observations,
        actions=np.clip(actions, -1.0, 1.0),
        rewards=rewards.astype(np.float32),
        seed=seed,
        success=success,
        instruction=instruction,
        task=task,
        terminated=bool(dones[-1]),
    )


def _optional(group: object, key: str, steps: int, where: str) -> np.ndarray:
    import h5py

    if not (isinstance(group, h5py.Group) and key in group):
        return np.zeros(steps, dtype=np.float32)
    values = _array(group, key, where).reshape(-1)
    if len(values) != steps:
        raise DemosError(f"{where}/{key}: {len(values)} steps, but {steps} actions")
    return values.astype(np.float32)


def upright_images(frames: np.ndarray, size: int, where: str = "") -> np.ndarray:
    """LIBERO's camera frames ``[T, H, W, 3]`` (upside down) upright, resized to ``size``.

    Raises:
        DemosError: Not ``[T, H, W, 3]`` uint8 frames.
    """
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise DemosError(
            f"{where}: camera frames [T, H, W, 3] uint8 expected, got "
            f"{list(frames.shape)} {frames.dtype}"
        )
    upright = frames[:, ::-1, ::-1]
    if frames.shape[1:3] == (size, size):
        return np.ascontiguousarray(upright)
    from PIL import Image

    return np.stack(
        [
            np.asarray(
                Image.fromarray(np.ascontiguousarray(f)).resize((size, size), Image.BILINEAR)
            )
            for f in upright
        ]
    )


def chunk_episode(episode: Episode, chunk: int) -> Episode:
    """An episode of single actions as the env steps of an ``action_chunk`` env.

    Step ``k`` of the result is steps ``k*chunk .. k*chunk+chunk-1``: the observation of its
    first step, the actions concatenated (``[chunk * A]``; a last, shorter chunk is padded
    with its final action) and the rewards summed, as the env's chunk wrapper steps.
    """
    if chunk == 1:
        return episode
    steps = len(episode)
    starts = np.arange(0, steps, chunk)
    padded = np.concatenate(
        [episode.actions, np.repeat(episode.actions[-1:], len(starts) * chunk - steps, axis=0)]
    )
    return Episode(
        observations={k: v[starts] for k, v in episode.observations.items()},
        actions=padded.reshape(len(starts), chunk * episode.actions.shape[1]),
        rewards=np.add.reduceat(episode.rewards, starts).astype(np.float32),
        seed=episode.seed,
        success=episode.success,
        instruction=episode.instruction,
        task=episode.task,
        terminated=episode.terminated,
    )
