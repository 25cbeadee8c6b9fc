"""eval_video step: one rendered evaluation episode, logged to MLflow as a GIF.

Rendering runs as an ``eval_video`` fan-out task on a Ray worker (the runtime's
``video_job``): it builds its own env with ``render_mode="rgb_array"`` and the policy from the
weights ObjectRef, and returns the GIF bytes; the driver uploads them to the MLflow run as
``eval/videos/episode_<step>.gif`` (the step of the eval metrics it belongs to).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from infra.driver.session import TrainSession
from infra.driver.step_runtime import StepResult
from rl_core.config import RLPipeConfig
from tasks.fanout import run_jobs

logger = logging.getLogger("rlpipe.video")
VIDEO_ARTIFACT_DIR = "eval/videos"


def video_due(cfg: RLPipeConfig, iteration: int, final: bool) -> bool:
    """Whether the evaluation of ``iteration`` also records a video."""
    if not cfg.records_videos():
        return False
    every = cfg.eval.video_interval
    periodic = every > 0 and (iteration + 1) % every == 0
    return cfg.tracking.enabled and (final or periodic)


def record_video(session: TrainSession, iteration: int) -> dict[str, Any] | None:
    """Render the runtime's video job (if its category has one); log the GIF to MLflow."""
    started = time.perf_counter()
    job = session.runtime.video_job(iteration)
    if job is None:
        return None
    (result,) = run_jobs([job], iteration, session.cfg.timeouts.evaluate, "evaluate")
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


def add_video(session: TrainSession, iteration: int, evaluation: StepResult) -> None:
    """Record the evaluation video into ``evaluation`` (the evaluate step's result).

    Best effort: a failure is logged and training goes on. The render time is added to the
    step's worker seconds and reported as ``time/eval_video``; the artifact path goes to
    ``evaluation.info["artifact"]``.
    """
    try:
        video = record_video(session, iteration)
    except Exception as exc:  # noqa: BLE001 - a video never fails an iteration
        logger.warning("evaluation video of iteration %d failed: %s", iteration, exc)
        return
    if video:
        seconds = float(video.pop("seconds"))
        evaluation.seconds += seconds
        evaluation.metrics["time/eval_video"] = seconds
        if "artifact" in video:
            evaluation.info["artifact"] = video.pop("artifact")
        evaluation.metrics.update({k: float(v) for k, v in video.items()})
