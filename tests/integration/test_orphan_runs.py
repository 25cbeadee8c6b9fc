"""Child flow runs a Prefect API restart left Pending are cancelled when the run ends."""

from __future__ import annotations

import pytest
from prefect import flow, get_client, task
from prefect.context import FlowRunContext
from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.orphan_runs import MESSAGE, cancel_orphaned_children

pytestmark = pytest.mark.integration


@flow(name="orphan-test-child")
def child() -> int:
    return 1


@task
def placeholder() -> None:
    """The task a child flow run hangs under in its parent."""


@flow(name="orphan-test-parent")
def parent() -> tuple[str, str, int]:
    """A completed child, a child created but never started (as a restart leaves one),
    then the sweep; returns both children's ids and what the sweep cancelled."""
    child()
    run_id = FlowRunContext.get().flow_run.id
    with get_client(sync_client=True) as client:
        holder = client.create_task_run(placeholder, flow_run_id=run_id, dynamic_key="orphan")
        orphan = client.create_flow_run(child, parent_task_run_id=holder.id)
        children = client.read_flow_runs()
    done = next(r for r in children if r.name != orphan.name and r.flow_id == orphan.flow_id)
    return str(done.id), str(orphan.id), cancel_orphaned_children(str(run_id))


def test_a_child_left_pending_is_cancelled_and_the_others_kept(prefect_api: str) -> None:
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        done_id, orphan_id, cancelled = parent()
        with get_client(sync_client=True) as client:
            orphan = client.read_flow_run(orphan_id)
            done = client.read_flow_run(done_id)
    assert cancelled == 1
    assert orphan.state.type.value == "CANCELLED" and orphan.state.message == MESSAGE
    assert done.state.type.value == "COMPLETED"
    assert cancel_orphaned_children(None) == 0
