"""eval_video step: one rendered evaluation episode, logged to MLflow as a GIF.

Rendering runs in a Ray task (through the iteration flow's task runner, like the evaluation
episodes): it builds its own env with ``render_mode="rgb_array"`` and the policy from the
weights ObjectRef, and returns the GIF bytes; the driver uploads them to the MLflow run as
``eval/videos/episode_<step>.gif`` (the step of the eval metrics it belongs to).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prefect import task
from prefect_ray.context import remote_options

from infra.eval_video import render_episode
from infra.evaluation import eval_seeds
from tasks.options import STEP_OPTIONS

logger = logging.getLogger("rlpipe.video")
VIDEO_ARTIFACT_DIR = "eval/videos"


@task(name="eval_video", task_run_name="eval_video-{iteration}", **STEP_OPTIONS)
def eval_video(config: dict[str, Any], weights: Any, seed: int, iteration: int) -> dict[str, Any]:
    """Render one episode of the given weights to a GIF (runs on a Ray worker)."""
    return render_episode(config, weights, seed)


def video_due(cfg: Any, iteration: int, final: bool) -> bool:
    """Whether the evaluation of ``iteration`` also records a video."""
    every = cfg.eval.video_interval
    periodic = every > 0 and (iteration + 1) % every == 0
    return cfg.eval.video and cfg.tracking.enabled and (final or periodic)


def record_embodied_video(session: Any, iteration: int) -> dict[str, Any]:
    """Render the current policy on the first evaluation seed; log the GIF to MLflow."""
    started = time.perf_counter()
    seed = eval_seeds(session.cfg.run.seed, 1)[0]
    with remote_options(num_cpus=0):  # like the evaluation episodes: share the workers' CPUs
        future = eval_video.submit(
            session.runtime.config_dict, session.runtime.policy_weights_ref(), seed, iteration
        )
    result = future.result()
    gif = result.pop("gif")
    if gif is None:
        logger.info("no evaluation video for this env: %s", result["skipped"])
        return {"seconds": result["seconds"]}
    name = f"episode_{iteration:06d}.gif"
    if session.tracker:
        session.tracker.log_files({name: gif}, VIDEO_ARTIFACT_DIR)
    logger.info(
        "evaluation video %s/%s: %d frames, %.0f kB, return %.1f (render %.2fs, in all %.2fs)",
        VIDEO_ARTIFACT_DIR,
        name,
        result["frames"],
        len(gif) / 1024,
        result["return"],
        result["seconds"],
        time.perf_counter() - started,
    )
    return {
        "seconds": result["seconds"],
        "artifact": f"{VIDEO_ARTIFACT_DIR}/{name}",
        "eval/video_return": result["return"],
    }


#: Video recorders per model category; categories without one (reasoning) record none.
VIDEO_RECORDERS: dict[str, Callable[[Any, int], dict[str, Any]]] = {
    "embodied": record_embodied_video,
}


def record_video(session: Any, iteration: int) -> dict[str, Any] | None:
    """Record the evaluation video of ``session``'s category, if it has a recorder."""
    recorder = VIDEO_RECORDERS.get(session.cfg.category)
    return recorder(session, iteration) if recorder else None


def add_video(session: Any, iteration: int, evaluation: dict[str, Any]) -> None:
    """Record the evaluation video into ``evaluation`` (the evaluate step's result).

    Best effort: a failure is logged and training goes on. The render time is added to the
    step's worker ``seconds`` and reported as ``time/eval_video``.
    """
    try:
        video = record_video(session, iteration)
    except Exception as exc:  # noqa: BLE001 - a video never fails an iteration
        logger.warning("evaluation video of iteration %d failed: %s", iteration, exc)
        return
    if video:
        seconds = float(video.pop("seconds"))
        evaluation["seconds"] = float(evaluation.get("seconds", 0.0)) + seconds
        evaluation["time/eval_video"] = seconds
        evaluation.update(video)
