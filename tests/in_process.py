"""Iterations driven in the test process (no Prefect), with an undone rollout on request."""

from __future__ import annotations

from typing import Any

from infra.driver.runtimes import run_iteration_in_process


def run_iterations(
    runtime: Any, iterations: range, retry_rollout_at: int = -1
) -> list[dict[str, Any]]:
    """Run ``iterations``; each iteration's step results, in order.

    At ``retry_rollout_at`` a rollout is first run and undone, as before a retry.
    """
    results = []
    for it in iterations:
        if it == retry_rollout_at:
            runtime.weight_sync(it)
            runtime.snapshot("rollout")
            runtime.rollout(it)
            runtime.restore("rollout")
        results.append(run_iteration_in_process(runtime, it))
    return results
