"""The iteration flow: one training iteration as a child flow run named ``iteration-<k>``."""

from __future__ import annotations

import logging
import time
from typing import Any

from prefect import flow
from prefect.runtime import flow_run
from prefect_ray import RayTaskRunner

from infra.session import RunState, get_session
from tasks.advantage import advantage
from tasks.checkpoint import checkpoint
from tasks.evaluate import run_evaluation
from tasks.reward import run_reward_step
from tasks.rollout import rollout
from tasks.update import update
from tasks.video import add_video, video_due
from tasks.weight_sync import weight_sync

logger = logging.getLogger("rlpipe.iteration")
STEPS = (
    "weight_sync",
    "rollout",
    "reward",
    "advantage",
    "update",
    "sft_update",
    "evaluate",
    "checkpoint",
)


def _due(iteration: int, interval: int, last: bool) -> bool:
    return last or (interval > 0 and (iteration + 1) % interval == 0)


#: Options of the child flows a train flow runs (a retry rebuilds dead workers first).
CHILD_FLOW_OPTIONS: dict[str, Any] = {
    "persist_result": False,
    "retries": 2,
    "retry_delay_seconds": 0,
    "log_prints": False,
    "validate_parameters": False,
}


@flow(
    name="iteration",
    flow_run_name="iteration-{iteration}",
    task_runner=RayTaskRunner(),
    **CHILD_FLOW_OPTIONS,
)
def iteration_flow(session_id: str, iteration: int) -> dict[str, Any]:
    """Run weight_sync → rollout → reward → advantage → update → [evaluate] → [checkpoint].

    On a retry (a worker died), dead workers are rebuilt first; if the trainer died the
    run rewinds to its last checkpoint and the flow returns ``{"rewound_to": step}``.

    Returns:
        ``{"steps": {step: result}, ...}`` with each step's metrics and worker seconds.
    """
    body_started = time.perf_counter()
    session = get_session(session_id)
    if (flow_run.run_count or 1) > 1:
        rewound = _repair(session, iteration)
        if rewound is not None:
            return {"rewound_to": rewound, "steps": {}}
    steps: dict[str, dict[str, Any]] = {}
    steps["weight_sync"] = weight_sync(session_id, iteration)
    steps["rollout"] = rollout(session_id, iteration)
    steps["reward"] = run_reward_step(session_id, iteration)
    steps["advantage"] = advantage(session_id, iteration)
    steps["update"] = update(session_id, iteration)
    return finish_iteration(
        session,
        iteration,
        steps,
        env_steps=steps["rollout"]["env_steps"],
        body_started=body_started,
    )


@flow(
    name="evaluate-before-training",
    flow_run_name="evaluate-before-training",
    task_runner=RayTaskRunner(),
    **CHILD_FLOW_OPTIONS,
)
def baseline_evaluation_flow(session_id: str) -> dict[str, Any]:
    """Evaluate the starting weights (``eval.before_training``); records the result.

    Returns:
        The evaluate step's metrics (``eval/*`` and worker seconds).
    """
    session = get_session(session_id)
    metrics = run_evaluation(session, -1)
    session.state.initial_eval_return = metrics["eval/return_mean"]
    return metrics


def finish_iteration(
    session: Any,
    iteration: int,
    steps: dict[str, dict[str, Any]],
    env_steps: int,
    body_started: float,
) -> dict[str, Any]:
    """Count the iteration, evaluate and checkpoint when due; the iteration flows' result."""
    cfg = session.cfg
    last = iteration + 1 >= cfg.run.max_iterations
    state = session.state
    state.iteration = iteration + 1
    state.env_steps += int(env_steps)
    if _due(iteration, cfg.run.eval_interval, last):
        steps["evaluate"] = run_evaluation(session, iteration)
        ret = steps["evaluate"]["eval/return_mean"]
        state.last_eval_return = ret
        state.best_eval_return = (
            ret if state.best_eval_return is None else max(ret, state.best_eval_return)
        )
        target = cfg.run.stop_at_eval_return
        state.solved = target is not None and ret >= target
        if video_due(cfg, iteration, final=last or state.solved):
            add_video(session, iteration, steps["evaluate"])
    if _due(iteration, cfg.run.checkpoint_interval, last) or state.solved:
        steps["checkpoint"] = checkpoint(session.id, iteration)
    return {
        "steps": steps,
        "solved": state.solved,
        "body_started": body_started,
        "body_ended": time.perf_counter(),
    }


def _repair(session: Any, iteration: int) -> int | None:
    """Rebuild dead workers; returns the step rewound to if the trainer had to be reloaded."""
    rebuilt = session.runtime.repair(iteration)
    if rebuilt:
        logger.warning("iteration %d: rebuilt dead workers %s", iteration, rebuilt)
        session.write_worker_pids()
    if "actor" not in rebuilt:
        return None
    manifest = session.store.latest()
    if manifest is None:
        session.state = RunState()  # no checkpoint yet: start over from the initial weights
        return 0
    session.restore(manifest)
    return int(manifest["step"])
