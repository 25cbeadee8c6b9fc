"""Evaluation of control policies: episode jobs on the run's fixed seeds, their metrics.

Used by :class:`kinds.embodied.runtime.EmbodiedRuntime` during training and for a
checkpoint (``flows/evaluate.py``); the episodes run in fan-out tasks
(:func:`kinds.embodied.episodes.run_episodes`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from infra.driver.step_runtime import Evaluation, FanoutJob
from infra.tracking.version_scoring import Protocol, VersionScore
from kinds.embodied.config import EmbodiedConfig
from kinds.embodied.episodes import run_episodes
from kinds.embodied.video import render_episode
from rl_core.seeding import eval_seeds

logger = logging.getLogger(__name__)


def evaluation_jobs(cfg: EmbodiedConfig, config: dict[str, Any], weights: Any) -> list[FanoutJob]:
    """Deterministic episodes on the fixed evaluation seeds, in ``eval.num_tasks`` parts.

    Args:
        cfg: The validated run config.
        config: The same as a plain dict (what the tasks rebuild the policy from).
        weights: ObjectRef of the trainer's weights.
    """
    num = cfg.eval.num_episodes
    seeds = eval_seeds(cfg.run.seed, num)
    parts = [list(p) for p in np.array_split(seeds, min(cfg.eval.num_tasks, num))]
    return [
        FanoutJob(
            "eval_episodes",
            run_episodes,
            {"config": config, "state_dict": weights, "seeds": [int(s) for s in p]},
        )
        for p in parts
    ]


def combine_episodes(results: list[Any]) -> Evaluation:
    """The episode jobs' returns, lengths and successes as ``eval/*`` metrics.

    ``eval/success_rate`` is there when the env reports ``info["success"]`` (manipulation
    tasks): the share of episodes that succeeded at some step.
    """
    returns = [r for res in results for r in res["returns"]]
    lengths = [n for res in results for n in res["lengths"]]
    metrics = {
        "eval/return_mean": float(np.mean(returns)),
        "eval/return_std": float(np.std(returns)),
        "eval/return_min": float(np.min(returns)),
        "eval/length_mean": float(np.mean(lengths)),
        "eval/episodes": float(len(returns)),
    }
    metrics.update(_success_metrics(results))
    return Evaluation(metrics, seconds=max(res["seconds"] for res in results))


def _success_metrics(results: list[Any]) -> dict[str, float]:
    successes = [x for res in results for x in res.get("successes", [])]
    return {"eval/success_rate": float(np.mean(successes))} if successes else {}


def video_job(cfg: EmbodiedConfig, config: dict[str, Any], weights: Any) -> FanoutJob:
    """Render the policy with ``weights`` on the first evaluation seed."""
    seed = eval_seeds(cfg.run.seed, 1)[0]
    return FanoutJob(
        "eval_video", render_episode, {"config": config, "state_dict": weights, "seed": seed}
    )


def evaluate_checkpoint(
    checkpoint: dict[str, Any], episodes: int
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Deterministic episodes of the checkpoint's policy, split like in training.

    Seeds are split into ``eval.num_tasks`` parts exactly as in training, so batch
    shapes (and therefore float rounding) match the in-training evaluation. The sample rows
    are the episodes: ``seed``, ``return``, ``length`` (and ``success`` for envs that
    report it).
    """
    config = checkpoint["config"]
    config = {**config, "eval": {**config["eval"], "deterministic": True}}
    seeds = eval_seeds(int(config["run"]["seed"]), episodes)
    parts = np.array_split(seeds, min(int(config["eval"]["num_tasks"]), episodes))
    weights = checkpoint["weights"]
    results = [run_episodes(config, weights, [int(s) for s in part]) for part in parts]
    returns = [r for res in results for r in res["returns"]]
    lengths = [n for res in results for n in res["lengths"]]
    rows = [
        {"seed": int(seed), "return": float(ret), "length": int(length)}
        for seed, ret, length in zip(seeds, returns, lengths, strict=True)
    ]
    successes = [x for res in results for x in res.get("successes", [])]
    if len(successes) == len(rows):
        for row, success in zip(rows, successes, strict=True):
            row["success"] = success
    metrics = {
        "eval/return_mean": sum(returns) / len(returns),
        "eval/return_min": min(returns),
        "eval/return_max": max(returns),
        "eval/episodes": len(returns),
        **_success_metrics(results),
    }
    headline = f"mean return {metrics['eval/return_mean']:.1f} over {len(returns)} episodes"
    if "eval/success_rate" in metrics:
        headline += f", success rate {metrics['eval/success_rate']:.2f}"
    return metrics, rows, headline


def score_version(protocol: Protocol, model_dir: Path, version: Any) -> VersionScore:
    """Play the protocol's evaluation episodes with the version's policy."""
    from infra.checkpoint.export import load_exported_policy

    policy, meta = load_exported_policy(model_dir)
    weights = {k: v.detach().cpu().numpy() for k, v in policy.state_dict().items()}
    config = {**protocol.config, "model": {**protocol.config["model"], **meta["model"]}}
    episodes = int(protocol.config["eval"]["num_episodes"])
    metrics, rows, headline = evaluate_checkpoint({"config": config, "weights": weights}, episodes)
    logger.info("version %s: %s", version.version, headline)
    return VersionScore(str(version.version), float(metrics[protocol.metric]), rows)
