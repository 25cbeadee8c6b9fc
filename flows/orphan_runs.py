"""Child flow runs a Prefect API restart left behind, cancelled at the end of a run.

Prefect creates a child flow run (Pending, under a generated name), then names and starts
it. When the API stops between the two, the engine's retry creates the child again and the
first one stays Pending for good: the Prefect UI would show a never-started run beside the
iteration that did run. Nothing of the run's work is in it, so the train flow cancels such
runs when it ends, saying why.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

#: Why the orphans are cancelled (their state message in the Prefect UI).
MESSAGE = (
    "created while the Prefect API was restarting and never started; the train flow "
    "created the child again and ran it"
)


def cancel_orphaned_children(parent_flow_run_id: str | None) -> int:
    """Cancel the child flow runs of ``parent_flow_run_id`` still Pending.

    Call it when the parent has no child left to start (its loop is over). A Prefect API
    that does not answer only costs a warning: the runs stay as they are.

    Returns:
        How many runs were cancelled.
    """
    if not parent_flow_run_id:
        return 0
    from prefect import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterParentFlowRunId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Cancelled

    pending = FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent_flow_run_id]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PENDING])),
    )
    try:
        with get_client(sync_client=True) as client:
            orphans = client.read_flow_runs(flow_run_filter=pending)
            for run in orphans:
                client.set_flow_run_state(run.id, Cancelled(message=MESSAGE), force=True)
    except Exception as exc:  # noqa: BLE001 - the run's own work is done and committed
        logger.warning("could not look for child flow runs left Pending: %s", exc)
        return 0
    for run in orphans:
        logger.warning("cancelled child flow run %r (%s): %s", run.name, run.id, MESSAGE)
    return len(orphans)
