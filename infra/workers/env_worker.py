"""EnvWorker: a vectorized env that collects trajectories by querying a rollout worker."""

from __future__ import annotations

from typing import Any

import numpy as np
import ray

from infra.workers.base import Stopwatch, WorkerBase, worker_seed
from rl_core.envs import EnvSpaces, VectorEnvAdapter
from rl_core.training.batch import stack_steps


class EnvWorker(WorkerBase):
    """Holds ``env.num_envs`` envs and runs the env side of the rollout loop."""

    group = "env"

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        super().__init__(config, rank, cpus)
        env = self.cfg.env
        self.seed = worker_seed(self.cfg.run.seed, "env", rank) * env.num_envs
        self.envs = VectorEnvAdapter(
            env, env.num_envs, self.seed, env.group_size, env.vectorization
        )

    def spaces(self) -> EnvSpaces:
        """Single-env observation/action spaces (for building models)."""
        return self.envs.spaces

    def interact(self, rollout: Any, num_steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Collect ``num_steps`` steps of every env, asking ``rollout`` for actions.

        Args:
            rollout: Handle of the RolloutWorker to query.
            num_steps: Steps per env.

        Returns:
            ``(batch, stats)``: the time-major batch (see ``rl_core.training.batch``) and
            small statistics (episodes finished, env steps, seconds spent).
        """
        watch = Stopwatch()
        env_time = 0.0
        steps, trunc_index, trunc_obs = [], [], []
        episodes: list[tuple[float, int]] = []
        obs = self.envs.observation()
        for t in range(num_steps):
            actions, result = ray.get(rollout.predict.remote(obs, "train"))
            step_watch = Stopwatch()
            out = self.envs.step(actions)
            env_time += step_watch.elapsed()
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
            for n in np.flatnonzero(out["truncated"]):
                trunc_index.append((t, n))
                trunc_obs.append({k: v[n] for k, v in out["final_obs"].items()})
            episodes.extend(out["episodes"])
            obs = out["env_obs"]
        batch = stack_steps(steps)
        batch["trunc_index"] = np.asarray(trunc_index, dtype=np.int64).reshape(-1, 2)
        batch["trunc_obs"] = (
            stack_steps(trunc_obs) if trunc_obs else {k: v[:0] for k, v in obs.items()}
        )
        batch["next_obs"] = obs
        stats = {
            "episode_returns": [e[0] for e in episodes],
            "episode_lengths": [e[1] for e in episodes],
            "env_steps": num_steps * self.envs.num_envs,
            "seconds": watch.elapsed(),
            "env_seconds": env_time,
        }
        return batch, stats

    def get_state(self) -> bytes | None:
        """Picklable env state for checkpoints (None if the env cannot be pickled)."""
        return self.envs.get_state()

    def set_state(self, state: bytes | None, fallback_seed: int) -> None:
        """Restore env state, or reseed deterministically when none was saved."""
        if state is None:
            self.envs.reset(fallback_seed)
        else:
            self.envs.set_state(state)
