"""EnvWorker: a vectorized env that collects trajectories by querying a rollout worker."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from kinds.embodied.config import EmbodiedConfig
from rl_core.data.batch import stack_steps
from rl_core.envs import EnvSpaces, VectorEnvAdapter
from rl_core.seeding import env_base_seed


class EnvWorker(WorkerBase[EmbodiedConfig]):
    """Holds ``env.num_envs`` envs and runs the env side of the rollout loop."""

    group = "env"

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        super().__init__(config, rank, cpus)
        env = self.cfg.env
        self.num_envs = env.num_envs
        self.stages = self.cfg.rollout.pipeline_stages
        self.seed = env_base_seed(self.cfg.run.seed, rank, env.num_envs)
        width = env.num_envs // self.stages
        # One vectorized env per pipeline stage; env i keeps seed + i // group_size.
        # ``auto`` pipelines single envs: a batched simulator is one slice
        vectorization = env.vectorization
        if vectorization == "auto" and self.stages > 1:
            vectorization = "sync"
        self.slices = [
            VectorEnvAdapter(
                env,
                width,
                self.seed + (k * width) // env.group_size,
                env.group_size,
                vectorization,
                device=str(self.device),
            )
            for k in range(self.stages)
        ]
        self.vectorization = self.slices[0].vectorization
        # async mode: env and sampling state before each batch still in the pipeline
        self._before: dict[int, tuple[list[Any], Any]] = {}
        self.keep_batches = self.cfg.algorithm.max_staleness + 2

    def spaces(self) -> EnvSpaces:
        """Single-env observation/action spaces (for building models)."""
        return self.slices[0].spaces

    @step_method
    def interact(
        self, rollout: Any, num_steps: int, version: int | None = None, key: int | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Collect ``num_steps`` steps of every env, asking ``rollout`` for actions.

        With ``rollout.pipeline_stages > 1`` the envs are split into that many slices whose
        requests are in flight at once (RLinf's rollout pipelining): while the rollout worker computes
        actions for one slice, this worker steps another, hiding the Ray round trip. The
        rollout worker serves one caller's requests in order, so sampling stays
        deterministic.

        Args:
            rollout: Handle of the RolloutWorker to query.
            num_steps: Steps per env.
            version: The weight version every action of this batch is sampled with (async
                mode; None: whatever the rollout worker holds).
            key: Async mode: the batch's index; the env and sampling state from before it
                are kept under it for :meth:`rewind`.

        Returns:
            ``(batch, stats)``: the time-major batch (see ``rl_core.data.batch``) and
            small statistics (episodes finished, env steps, seconds spent, the weight
            version, and wall-clock start and end).
        """
        watch = Stopwatch()
        started = time.time()
        if key is not None:
            self._keep_state_before(key, rollout)
        pending = [
            rollout.predict.remote(env.observation(), "train", self.rank, version)
            for env in self.slices
        ]
        env_time = 0.0
        steps, trunc_index, trunc_obs = [], [], []
        episodes: list[tuple[float, int, bool | None]] = []
        for t in range(num_steps):
            parts = []
            for k, env in enumerate(self.slices):
                actions, result = ray.get(pending[k])
                step_watch = Stopwatch()
                out = env.step(actions)
                env_time += step_watch.elapsed()
                if t + 1 < num_steps:
                    pending[k] = rollout.predict.remote(out["env_obs"], "train", self.rank, version)
                parts.append((result, out))
            result, out = _merge_parts(parts)
            steps.append(
                {
                    "forward_inputs": result["forward_inputs"],
                    "prev_logprobs": result["prev_logprobs"],
                    "prev_values": result["prev_values"],
                    "rewards": out["rewards"],
                    "terminated": out["terminated"],
                    "truncated": out["truncated"],
                }
            )
            for i in np.flatnonzero(out["truncated"]):
                trunc_index.append((t, i))
                trunc_obs.append({k: v[i] for k, v in out["final_obs"].items()})
            episodes.extend(out["episodes"])
        obs = _concat([env.observation() for env in self.slices])
        batch = stack_steps(steps)
        batch["trunc_index"] = np.asarray(trunc_index, dtype=np.int64).reshape(-1, 2)
        batch["trunc_obs"] = (
            stack_steps(trunc_obs) if trunc_obs else {k: v[:0] for k, v in obs.items()}
        )
        batch["next_obs"] = obs
        stats = {
            "episode_returns": [e[0] for e in episodes],
            "episode_lengths": [e[1] for e in episodes],
            # envs that report info["success"]: whether each ended episode succeeded
            "episode_successes": [float(e[2]) for e in episodes if e[2] is not None],
            "env_steps": num_steps * self.num_envs,
            "seconds": watch.elapsed(),
            "env_seconds": env_time,
            "weights_version": version,
            "started_at": started,
            "finished_at": time.time(),
        }
        return batch, stats

    def _keep_state_before(self, key: int, rollout: Any) -> None:
        rng = ray.get(rollout.get_caller_rng.remote(self.rank))
        self._before[key] = ([env.get_state() for env in self.slices], rng)
        for old in [k for k in self._before if k < key - self.keep_batches]:
            del self._before[old]

    def rewind(self, rollout: Any, key: int) -> bool:
        """Put back the env and sampling state from before batch ``key`` (async mode).

        A batch that failed before it started changed nothing, so the state from before the
        first later batch that started is the same.

        Returns:
            Whether a kept state was put back (False: nothing ran since, nothing to undo).
        """
        keys = sorted(k for k in self._before if k >= key)
        if not keys:
            return False
        envs, rng = self._before[keys[0]]
        for env, data in zip(self.slices, envs, strict=True):
            env.set_state(data)
        ray.get(rollout.set_caller_rng.remote(self.rank, rng))
        for k in keys:
            del self._before[k]
        return True

    def snapshot(self) -> None:
        """Keep the envs' state in memory (before a rollout)."""
        self._snapshot = [env.get_state() for env in self.slices]
        if any(s is None for s in self._snapshot):
            raise RuntimeError(
                f"env {self.cfg.env.env_id!r} cannot be snapshotted (its state does not pickle)"
            )

    def restore_snapshot(self) -> None:
        """Put back the envs' state kept by :meth:`snapshot`."""
        for env, data in zip(self.slices, self._snapshot, strict=True):
            env.set_state(data)

    def get_state(self) -> list[dict[str, Any]] | None:
        """Env state per slice for checkpoints (None if an env cannot be pickled).

        Each slice's ``envs`` bytes are a pickle: the driver signs them when it saves the
        checkpoint and verifies them before it sends them back to :meth:`set_state`.
        """
        states = [env.get_state() for env in self.slices]
        return None if any(s is None for s in states) else states

    def set_state(self, state: list[dict[str, Any] | bytes] | None, fallback_seed: int) -> None:
        """Restore env state, or reseed deterministically when none was saved."""
        self._before.clear()
        if state is None or len(state) != len(self.slices):
            width = self.num_envs // self.stages
            for k, env in enumerate(self.slices):
                env.reset(fallback_seed + k * width)
        else:
            for env, data in zip(self.slices, state, strict=True):
                env.set_state(data)


def _concat(trees: list[Any]) -> Any:
    if isinstance(trees[0], dict):
        return {k: _concat([t[k] for t in trees]) for k in trees[0]}
    if trees[0] is None:
        return None
    return np.concatenate(trees) if len(trees) > 1 else trees[0]


def _merge_parts(parts: list[tuple[dict, dict]]) -> tuple[dict, dict]:
    """Join per-slice (result, step output) pairs back into whole-batch arrays."""
    if len(parts) == 1:
        return parts[0]
    results = _concat([p[0] for p in parts])
    outs = {k: _concat([p[1][k] for p in parts]) for k in ("rewards", "terminated", "truncated")}
    outs["final_obs"] = _concat([p[1]["final_obs"] for p in parts])
    outs["episodes"] = [e for p in parts for e in p[1]["episodes"]]
    return results, outs
