"""Stable-Baselines3 anchors with the rl-baselines3-zoo hyperparameters.

PPO on CartPole-v1 and SAC on Pendulum-v1 (:data:`ANCHORS`, keyed by env id). Run as its own
process by ``cartpole_solve.py``:
``python benchmarks/_sb3_anchor.py SEED PROTOCOL_JSON``. It trains with one torch thread,
evaluates from a callback exactly as rlpipe does (:class:`_solve_protocol.EvalProtocol`:
same episode seeds, vector-env width, greedy actions, interval in env steps, target), stops
once an evaluation reaches the target, and prints one ``SB3_RESULT {json}`` line whose
``solved_unix`` is ``time.time()`` when the solving evaluation finished.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from _solve_protocol import RESULT_PREFIX, EvalProtocol
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger


def linear(initial: float) -> Any:
    """The zoo's ``lin_<x>`` schedule: ``x`` times the remaining progress (1 → 0)."""
    return lambda progress_remaining: progress_remaining * initial


#: ``hyperparams/ppo.yml`` of rl-baselines3-zoo, entry ``CartPole-v1`` (no normalization).
ZOO_CARTPOLE: dict[str, Any] = {
    "n_envs": 8,
    "n_timesteps": int(1e5),
    "policy": "MlpPolicy",
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": linear(1e-3),
    "clip_range": linear(0.2),
}


#: ``hyperparams/sac.yml`` of rl-baselines3-zoo, entry ``Pendulum-v1`` (the rest are SAC's
#: defaults: 256x256 networks, batch 256, buffer 1e6, 100 learning starts, tau 0.005,
#: gamma 0.99, one gradient step per env step, auto-tuned entropy).
ZOO_PENDULUM_SAC: dict[str, Any] = {
    "n_envs": 1,
    "n_timesteps": 20_000,
    "policy": "MlpPolicy",
    "learning_rate": 1e-3,
}

#: env id → (algorithm class, zoo hyperparameters).
ANCHORS: dict[str, tuple[type[BaseAlgorithm], dict[str, Any]]] = {
    "CartPole-v1": (PPO, ZOO_CARTPOLE),
    "Pendulum-v1": (SAC, ZOO_PENDULUM_SAC),
}


def evaluate(model: BaseAlgorithm, protocol: EvalProtocol) -> float:
    """Mean return over the protocol's episodes, batched like rlpipe's ``run_episodes``."""
    returns: list[float] = []
    for part in np.array_split(protocol.seeds, min(protocol.num_tasks, len(protocol.seeds))):
        seeds = [int(s) for s in part]
        width = max(1, min(protocol.num_envs, len(seeds)))
        for start in range(0, len(seeds), width):
            returns += _play(model, protocol, seeds[start : start + width])
    return float(np.mean(returns))


def _play(model: BaseAlgorithm, protocol: EvalProtocol, seeds: list[int]) -> list[float]:
    """One episode per seed in one vector env; steps after an episode's end are ignored."""
    fns = [lambda: gym.make(protocol.env_id, **protocol.env_kwargs) for _ in seeds]
    envs = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        obs, _ = envs.reset(seed=seeds)
        done = np.zeros(len(seeds), dtype=bool)
        returns = np.zeros(len(seeds))
        for _ in range(protocol.max_steps):
            actions, _ = model.predict(obs, deterministic=protocol.deterministic)
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            returns[~done] += np.asarray(rewards, dtype=np.float32)[~done]
            done |= np.asarray(terminated) | np.asarray(truncated)
            if done.all():
                break
        return returns.tolist()
    finally:
        envs.close()


class SolveCallback(BaseCallback):
    """Evaluate every ``interval_steps`` env steps after an update; stop once solved.

    SB3 trains right after collecting a rollout (PPO: n_steps per env; SAC: one step), so
    the start of the next rollout is the first moment the policy has learned from all
    ``num_timesteps`` steps (like rlpipe, which evaluates after the iteration's update).
    """

    def __init__(self, protocol: EvalProtocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.next_eval = protocol.interval_steps
        self.evals: list[tuple[int, float]] = []
        self.solved_unix: float | None = None

    def evaluate_now(self) -> None:
        """Evaluate the current policy; record the time if it reaches the target."""
        mean = evaluate(self.model, self.protocol)
        self.evals.append((self.model.num_timesteps, mean))
        target = self.protocol.target
        if target is not None and mean >= target:
            self.solved_unix = time.time()

    def _on_rollout_start(self) -> None:
        interval = self.protocol.interval_steps
        steps = self.model.num_timesteps
        if interval and steps >= self.next_eval:
            self.evaluate_now()
            while self.next_eval <= steps:
                self.next_eval += interval

    def _on_step(self) -> bool:
        return self.solved_unix is None


def main(argv: list[str]) -> int:
    """Train seed ``argv[0]`` under protocol ``argv[1]``; print the result line."""
    seed, protocol = int(argv[0]), EvalProtocol.from_json(argv[1])
    torch.set_num_threads(1)
    algorithm, zoo = ANCHORS[protocol.env_id]
    params = dict(zoo)
    n_envs, n_timesteps = params.pop("n_envs"), params.pop("n_timesteps")
    env = make_vec_env(protocol.env_id, n_envs=n_envs, seed=seed, env_kwargs=protocol.env_kwargs)
    model = algorithm(env=env, seed=seed, device="cpu", verbose=0, **params)
    model.set_logger(Logger(folder=None, output_formats=[]))  # its default makes a /tmp folder
    callback = SolveCallback(protocol)
    model.learn(total_timesteps=n_timesteps, callback=callback)
    if callback.solved_unix is None and (
        not callback.evals or callback.evals[-1][0] != model.num_timesteps
    ):
        callback.evaluate_now()  # the final evaluation, as rlpipe's last iteration has
    steps, mean = callback.evals[-1] if callback.evals else (model.num_timesteps, None)
    result = {
        "solved": callback.solved_unix is not None,
        "solved_unix": callback.solved_unix,
        "env_steps": steps,
        "eval_return": mean,
        "evaluations": len(callback.evals),
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
