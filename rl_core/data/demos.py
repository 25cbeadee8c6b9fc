"""Demonstration datasets: whole episodes of observations, actions and instructions.

One folder per dataset, written by ``rlpipe demos`` and read by behaviour cloning and by
offline RL (``demos.path``)::

    demos.json                  # the manifest (below)
    shard-00000.safetensors     # episodes, step arrays concatenated
    shard-00001.safetensors
    ...

Each shard holds, for its ``T`` steps and ``E`` episodes:

- ``obs.<key>`` [T, ...]: the observation the action was taken in, one array per
  observation key (``obs.states`` float32 [T, D], ``obs.main_images`` uint8 [T, H, W, 3]);
- ``actions`` float32 [T, A]: the env actions, as the env executes them;
- ``rewards`` float32 [T];
- ``episode_length`` int64 [E], ``episode_seed`` int64 [E], ``episode_success`` uint8 [E],
  ``episode_return`` float32 [E]: one row per episode, episodes in step order;
- ``final_obs.<key>`` [E, ...]: the observation after each episode's last step (where
  offline RL bootstraps from when the episode was truncated);
- ``episode_terminated`` uint8 [E]: the last step ended in a terminal state (no bootstrap),
  not a time limit;
- ``episode_action_noise`` float32 [E]: the std of the Gaussian noise added to the actions
  of each episode (0: the expert's own actions);
- metadata ``instructions`` and ``tasks``: JSON lists of one string per episode.

``final_obs.*``, ``episode_terminated`` and ``episode_action_noise`` are optional: datasets
written before them load as they are (:func:`demo_transitions` then leaves out each episode's
last step, whose next observation is unknown, and counts their noise as 0).

``demos.json`` holds ``format`` (``"rlpipe-demos"``), ``version`` (1), the ``env`` section the
episodes were played in, the ``source`` of the actions (e.g. ``metaworld_expert``), the
counts (``episodes``, ``steps``, ``successes``), ``action_noise`` (per noise std: episodes,
successes and mean return), the shapes and dtypes of the observation keys and of the
actions, and the shard file names. Safetensors and JSON only: loading a dataset runs no
code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

MANIFEST = "demos.json"
FORMAT = "rlpipe-demos"
VERSION = 1
OBS_PREFIX = "obs."
FINAL_OBS_PREFIX = "final_obs."


class DemosError(ValueError):
    """A demonstration dataset that is missing, malformed or does not fit the run."""


@dataclass
class Episode:
    """One demonstrated episode.

    Attributes:
        observations: Per observation key, the ``[T, ...]`` observations actions were taken in.
        actions: ``[T, A]`` env actions.
        rewards: ``[T]`` rewards.
        seed: The env's reset seed.
        success: Whether the task succeeded at some step.
        instruction: The task's instruction (empty when the env has none).
        task: The task's name (empty when the env has one task).
        final_observation: Per observation key, the observation after the last step
            (None: not recorded).
        terminated: The last step ended in a terminal state (not a time limit).
        action_noise: Std of the Gaussian noise added to the actions (0: none).
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    seed: int
    success: bool
    instruction: str = ""
    task: str = ""
    final_observation: dict[str, np.ndarray] | None = None
    terminated: bool = False
    action_noise: float = 0.0

    def __len__(self) -> int:
        return int(self.actions.shape[0])


@dataclass
class Demos:
    """A loaded dataset: step arrays of all its episodes, concatenated.

    Attributes:
        observations: Per observation key, ``[N, ...]`` arrays.
        actions: ``[N, A]`` float32.
        instructions: ``[N]`` numpy str array (the step's episode instruction).
        episode_index: ``[N]`` episode of each step.
        episode_success: ``[E]`` bool.
        manifest: The dataset's ``demos.json``.
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    instructions: np.ndarray
    episode_index: np.ndarray
    episode_success: np.ndarray
    manifest: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def env_obs(self, rows: np.ndarray) -> dict[str, Any]:
        """The policy's ``env_obs`` for steps ``rows`` (``task_descriptions`` included)."""
        obs: dict[str, Any] = {k: v[rows] for k, v in self.observations.items()}
        obs["task_descriptions"] = self.instructions[rows]
        return obs


def write_shard(folder: str | Path, index: int, episodes: Sequence[Episode]) -> str:
    """Write ``episodes`` as shard ``index`` of the dataset in ``folder``; returns its name."""
    if not episodes:
        raise DemosError("a shard needs at least one episode")
    keys = sorted(episodes[0].observations)
    tensors: dict[str, np.ndarray] = {
        OBS_PREFIX + k: np.concatenate([e.observations[k] for e in episodes]) for k in keys
    }
    tensors["actions"] = np.concatenate([e.actions for e in episodes]).astype(np.float32)
    tensors["rewards"] = np.concatenate([e.rewards for e in episodes]).astype(np.float32)
    tensors["episode_length"] = np.array([len(e) for e in episodes], dtype=np.int64)
    tensors["episode_seed"] = np.array([e.seed for e in episodes], dtype=np.int64)
    tensors["episode_success"] = np.array([e.success for e in episodes], dtype=np.uint8)
    tensors["episode_return"] = np.array([e.rewards.sum() for e in episodes], dtype=np.float32)
    tensors["episode_terminated"] = np.array([e.terminated for e in episodes], dtype=np.uint8)
    tensors["episode_action_noise"] = np.array([e.action_noise for e in episodes], dtype=np.float32)
    if all(e.final_observation is not None for e in episodes):
        for k in keys:
            tensors[FINAL_OBS_PREFIX + k] = np.stack(
                [np.asarray(e.final_observation[k]) for e in episodes]  # type: ignore[index]
            )
    metadata = {
        "instructions": json.dumps([e.instruction for e in episodes]),
        "tasks": json.dumps([e.task for e in episodes]),
    }
    name = f"shard-{index:05d}.safetensors"
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / f".{name}.tmp"
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp), metadata)
    tmp.replace(path / name)  # a reader never sees half a shard
    return name


def write_manifest(
    folder: str | Path, shards: Sequence[str], env: dict[str, Any], source: str
) -> dict[str, Any]:
    """Write ``demos.json`` for ``shards`` (already written) and return it."""
    path = Path(folder)
    episodes = steps = successes = 0
    shapes: dict[str, Any] = {}
    noise: dict[float, list[tuple[bool, float]]] = {}
    for name in shards:
        tensors, _ = _read_shard(path / name)
        count = int(tensors["episode_length"].shape[0])
        episodes += count
        steps += int(tensors["actions"].shape[0])
        successes += int(tensors["episode_success"].sum())
        levels = tensors.get("episode_action_noise", np.zeros(count, np.float32))
        for level, success, ret in zip(
            levels.tolist(),
            tensors["episode_success"].astype(bool).tolist(),
            tensors["episode_return"].tolist() if "episode_return" in tensors else [0.0] * count,
            strict=True,
        ):
            noise.setdefault(round(float(level), 6), []).append((success, float(ret)))
        shapes = {
            k.removeprefix(OBS_PREFIX): {"shape": list(v.shape[1:]), "dtype": str(v.dtype)}
            for k, v in tensors.items()
            if k.startswith(OBS_PREFIX) or k == "actions"
        }
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "source": source,
        "env": env,
        "episodes": episodes,
        "steps": steps,
        "successes": successes,
        "action_noise": [
            {
                "std": level,
                "episodes": len(rows),
                "successes": sum(s for s, _ in rows),
                "return_mean": round(float(np.mean([r for _, r in rows])), 3),
            }
            for level, rows in sorted(noise.items())
        ],
        "spaces": shapes,
        "shards": list(shards),
    }
    tmp = path / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path / MANIFEST)
    return manifest


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The dataset's ``demos.json``, checked.

    Raises:
        DemosError: No dataset there, or not one this version of rlpipe reads.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise DemosError(
            f"no demonstration dataset at {folder} ({MANIFEST} is missing); write one with "
            "`rlpipe demos`"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DemosError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DemosError(f"{path} is not an rlpipe demonstration manifest (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise DemosError(
            f"{path} has version {manifest.get('version')!r}; this rlpipe reads version {VERSION}"
        )
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not shards or not all(isinstance(s, str) for s in shards):
        raise DemosError(f"{path}: 'shards' must be a non-empty list of file names")
    return manifest


def load_demos(folder: str | Path, successful_only: bool = False) -> Demos:
    """Read a dataset written by :func:`write_shard` and :func:`write_manifest`.

    Args:
        folder: The dataset folder.
        successful_only: Keep only the episodes that succeeded.

    Raises:
        DemosError: A missing or malformed file, arrays whose lengths disagree, actions
            that are not finite, or no episode left to train on.
    """
    manifest = read_manifest(folder)
    parts: list[dict[str, np.ndarray]] = []
    instructions: list[np.ndarray] = []
    successes: list[np.ndarray] = []
    episode_index: list[np.ndarray] = []
    offset = 0
    for name in manifest["shards"]:
        tensors, meta = _read_shard(Path(folder) / name)
        lengths = tensors["episode_length"]
        texts = _json_list(meta, "instructions", len(lengths), name)
        keep = np.repeat(
            tensors["episode_success"].astype(bool) if successful_only else np.ones_like(lengths),
            lengths,
        ).astype(bool)
        parts.append({k: v[keep] for k, v in tensors.items() if _is_step_array(k)})
        instructions.append(np.repeat(np.array(texts, dtype=str), lengths)[keep])
        episode_index.append((offset + np.repeat(np.arange(len(lengths)), lengths))[keep])
        successes.append(tensors["episode_success"].astype(bool))
        offset += len(lengths)
    rows = sum(len(p["actions"]) for p in parts)
    if rows == 0:
        which = "successful episodes" if successful_only else "steps"
        raise DemosError(f"the demonstration dataset at {folder} has no {which}")
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return Demos(
        observations={
            k.removeprefix(OBS_PREFIX): v for k, v in joined.items() if k.startswith(OBS_PREFIX)
        },
        actions=joined["actions"],
        instructions=np.concatenate(instructions),
        episode_index=np.concatenate(episode_index),
        episode_success=np.concatenate(successes),
        manifest=manifest,
    )


def _is_step_array(key: str) -> bool:
    return key.startswith(OBS_PREFIX) or key in ("actions", "rewards")


def _read_shard(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A shard's arrays and metadata, checked for consistent lengths and finite actions."""
    if not path.is_file():
        raise DemosError(f"demonstration shard {path} is missing")
    try:
        tensors = load_file(str(path))
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as handle:
            meta = handle.metadata() or {}
    except Exception as exc:  # noqa: BLE001 - any decoding error means a bad file
        raise DemosError(f"{path} is not a readable safetensors file: {exc}") from None
    required = ("actions", "rewards", "episode_length", "episode_success")
    missing = [k for k in required if k not in tensors]
    if missing:
        raise DemosError(f"{path} lacks the arrays {missing}")
    steps = int(tensors["episode_length"].sum())
    episodes = int(tensors["episode_length"].shape[0])
    for key, value in tensors.items():
        if _is_step_array(key) and value.shape[0] != steps:
            raise DemosError(
                f"{path}: {key} has {value.shape[0]} rows but the episodes have {steps} steps"
            )
        per_episode = key.startswith(FINAL_OBS_PREFIX) or key.startswith("episode_")
        if per_episode and value.shape[0] != episodes:
            raise DemosError(
                f"{path}: {key} has {value.shape[0]} rows but the shard has {episodes} episodes"
            )
    actions = tensors["actions"]
    if not np.isfinite(actions).all():
        bad = int(np.flatnonzero(~np.isfinite(actions).all(axis=-1))[0])
        raise DemosError(f"{path}: actions row {bad} is not finite")
    return tensors, meta


def _json_list(meta: dict[str, str], key: str, length: int, shard: str) -> list[str]:
    try:
        values = json.loads(meta.get(key, "[]")) or [""] * length
    except ValueError:
        raise DemosError(f"{shard}: metadata {key!r} is not JSON") from None
    if len(values) != length or not all(isinstance(v, str) for v in values):
        raise DemosError(f"{shard}: metadata {key!r} must list {length} strings")
    return values


def demo_transitions(folder: str | Path, successful_only: bool = False) -> dict[str, np.ndarray]:
    """A dataset's steps as transitions for offline RL (:mod:`rl_core.data.replay_buffer`).

    Step ``t`` of an episode becomes ``(states, actions, rewards, next_states,
    terminated)``: ``next_states`` is the observation of step ``t + 1``, or the episode's
    ``final_obs.states`` after its last step, where ``terminated`` is the episode's
    ``episode_terminated`` (0 on every other step). A dataset without ``final_obs.states``
    (written before it was recorded) leaves each episode's last step out. ``actions`` are the
    env actions, as demonstrated.

    Args:
        folder: The dataset folder.
        successful_only: Keep only the episodes that succeeded.

    Returns:
        The :data:`~rl_core.data.replay_buffer.TRANSITION_KEYS` arrays, float32, one row
        per transition, episodes in dataset order.

    Raises:
        DemosError: A missing or malformed dataset, one without ``obs.states``, or no
            transition left.
    """
    from rl_core.data.replay_buffer import TransitionFileError, check_transitions

    manifest = read_manifest(folder)
    parts: list[dict[str, np.ndarray]] = []
    for name in manifest["shards"]:
        tensors, _ = _read_shard(Path(folder) / name)
        if OBS_PREFIX + "states" not in tensors:
            raise DemosError(
                f"{name} has no {OBS_PREFIX}states: offline RL trains on flat state "
                f"observations (the shard has {sorted(tensors)})"
            )
        parts.append(_shard_transitions(tensors, successful_only))
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if joined["rewards"].shape[0] == 0:
        which = "successful episodes" if successful_only else "transitions"
        raise DemosError(f"the demonstration dataset at {folder} has no {which}")
    try:
        return check_transitions(joined, str(folder))
    except TransitionFileError as exc:
        raise DemosError(str(exc)) from None


def _shard_transitions(
    tensors: dict[str, np.ndarray], successful_only: bool
) -> dict[str, np.ndarray]:
    """One shard's transitions (see :func:`demo_transitions`)."""
    states = (
        tensors[OBS_PREFIX + "states"].astype(np.float32).reshape(tensors["actions"].shape[0], -1)
    )
    lengths = tensors["episode_length"]
    count = len(lengths)
    final = tensors.get(FINAL_OBS_PREFIX + "states")
    terminal = tensors.get("episode_terminated", np.zeros(count, np.uint8)).astype(bool)
    keep_episode = tensors["episode_success"].astype(bool) if successful_only else None
    rows: list[np.ndarray] = []
    next_states = np.empty_like(states)
    terminated = np.zeros(states.shape[0], np.float32)
    start = 0
    for e, length in enumerate(lengths.tolist()):
        end = start + length
        next_states[start : end - 1] = states[start + 1 : end]
        if final is not None:
            next_states[end - 1] = final[e].reshape(-1)
            terminated[end - 1] = float(terminal[e])
        if keep_episode is None or keep_episode[e]:
            last = end if final is not None else end - 1  # no next observation: left out
            rows.append(np.arange(start, last))
        start = end
    index = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    return {
        "states": states[index],
        "actions": tensors["actions"].astype(np.float32)[index],
        "rewards": tensors["rewards"].astype(np.float32)[index],
        "next_states": next_states[index],
        "terminated": terminated[index],
    }
