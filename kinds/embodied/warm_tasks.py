"""Ray task workers warmed for the fan-out tasks before the first fan-out needs them.

A fan-out task (evaluation episodes, reward scoring) runs in a Ray task worker; a new one
pays a Python start and the imports of Prefect, prefect-ray and the evaluation code (≈ 2 s
alone, several on a busy 2-core machine). :func:`warm_task_workers` starts that work early
(the train CLI does it as soon as Ray is connected, the runtime again when it starts its
worker groups: the second call adds nothing), and the local cluster keeps idle workers
alive (``num_workers_soft_limit``), so the first evaluation finds them warm.
"""

from __future__ import annotations

from typing import Any

import ray

#: (Ray job id, refs of the warm-up tasks submitted in that job).
_submitted: tuple[str, list[Any]] | None = None


@ray.remote
def _warm_task_worker() -> int:
    """Import what fan-out tasks import, and open a Prefect client (its API may still boot)."""
    import prefect_ray  # noqa: F401
    from prefect.client.orchestration import get_client

    import kinds.embodied.episodes  # noqa: F401

    with get_client(sync_client=True) as client:
        client.api_healthcheck()  # returns, not raises, an error while the API boots
    return 0


def warm_task_workers(count: int) -> None:
    """Make sure ``count`` warm-up tasks were submitted in this driver's Ray job.

    Args:
        count: How many task workers the fan-out will use at once (``eval.num_tasks``).
            Does nothing while this process is not connected to Ray.
    """
    global _submitted
    if not ray.is_initialized():
        return
    job = ray.get_runtime_context().get_job_id()
    if _submitted is None or _submitted[0] != job:
        _submitted = (job, [])
    refs = _submitted[1]
    refs.extend(_warm_task_worker.options(num_cpus=0).remote() for _ in range(count - len(refs)))
