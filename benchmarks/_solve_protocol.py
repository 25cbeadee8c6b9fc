"""The evaluation protocol both sides of ``cartpole_solve.py`` share, and a run's result.

Standard library only: the Stable-Baselines3 subprocess imports it too, and must not pay
for rlpipe's imports.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

#: Start of the line on which the SB3 anchor process prints its result (JSON).
RESULT_PREFIX = "SB3_RESULT "
#: Envs the SB3 anchor has zoo hyperparameters for (``_sb3_anchor.ANCHORS``), and its algorithm.
SB3_ANCHOR_ENVS = {"CartPole-v1": "PPO", "Pendulum-v1": "SAC"}


@dataclass(frozen=True)
class EvalProtocol:
    """How and when a policy is evaluated, as rlpipe's config says (see :func:`from_config`).

    Attributes:
        env_id: gymnasium id of the task.
        env_kwargs: Extra keyword arguments of ``gymnasium.make`` (``max_episode_steps``
            included when the config sets it).
        seeds: Reset seed of each evaluation episode (the same set every time).
        num_tasks: Parts the seeds are split into (``numpy.array_split``), as rlpipe's tasks.
        num_envs: Most episodes played at once in one vector env.
        deterministic: Greedy actions.
        max_steps: Safety cap on steps per batch of episodes.
        interval_steps: Env steps between evaluations (0: only at the end).
        target: Mean return that counts as solved (None: never stop early).
    """

    env_id: str
    env_kwargs: dict[str, Any]
    seeds: list[int]
    num_tasks: int
    num_envs: int
    deterministic: bool
    max_steps: int
    interval_steps: int
    target: float | None

    def to_json(self) -> str:
        """The protocol as one JSON string (a subprocess argument)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> EvalProtocol:
        """Inverse of :meth:`to_json`."""
        return cls(**json.loads(text))


def from_config(cfg: Any, seeds: list[int]) -> EvalProtocol:
    """The evaluation protocol of an rlpipe run config.

    Args:
        cfg: A resolved ``RLPipeConfig`` (embodied).
        seeds: Its evaluation seeds (``rl_core.seeding.eval_seeds``).

    Returns:
        The protocol; the interval is ``run.eval_interval`` iterations times the env steps
        of one iteration (env workers × envs per worker × rollout steps).
    """
    kwargs = dict(cfg.env.kwargs)
    if cfg.env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.env.max_episode_steps
    steps_per_iteration = cfg.env.num_workers * cfg.env.num_envs * cfg.rollout.num_steps
    return EvalProtocol(
        env_id=cfg.env.env_id,
        env_kwargs=kwargs,
        seeds=list(seeds),
        num_tasks=cfg.eval.num_tasks,
        num_envs=cfg.eval.num_envs,
        deterministic=cfg.eval.deterministic,
        max_steps=cfg.eval.max_steps,
        interval_steps=cfg.run.eval_interval * steps_per_iteration,
        target=cfg.run.stop_at_eval_return,
    )


@dataclass
class SolveResult:
    """One run, timed from just before its process was launched.

    Attributes:
        solved: An evaluation reached the target.
        solved_s: Seconds from launch to the end of the solving evaluation (None if unsolved).
        env_steps: Training env steps at the solving (else the last) evaluation.
        eval_return: Mean return of that evaluation.
        exit_s: Seconds from launch to the process's exit.
        notes: Side figures (e.g. work between the solving evaluation and its timestamp).
    """

    solved: bool
    solved_s: float | None
    env_steps: int | None
    eval_return: float | None
    exit_s: float
    notes: dict[str, float] = field(default_factory=dict)


def median_solved_s(results: list[SolveResult]) -> float:
    """Median seconds to solve; an unsolved run counts as infinitely slow."""
    return statistics.median(r.solved_s if r.solved else float("inf") for r in results)
