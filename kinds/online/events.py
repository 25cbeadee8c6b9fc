"""The Prefect event an online server emits when a batch of feedback is ready.

Each time the feedback records no batch has claimed yet reach a multiple of the batch size,
``rlpipe.feedback.ready`` is emitted for the resource ``rlpipe.online.<run name>`` with the
count in its payload: an automation can start a training iteration on it. Claims lower the
count, so the next batch fires again.

The resource's label ``rlpipe.online.trainer`` says who trains on the feedback: ``run`` (the
run serving it trains by itself; the event is informational) or ``external`` (an endpoint
started by ``rlpipe serve``, trained by runs with ``online.server=external``: the
``train-online-on-feedback`` deployment's trigger matches these, and the payload's
``preset``, ``run_name`` and ``overrides`` are the parameters of the flow run it starts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EVENT = "rlpipe.feedback.ready"
#: The resource label naming who trains on the feedback (``run`` or ``external``).
TRAINER_LABEL = "rlpipe.online.trainer"


def emit_prefect_event(resource: dict[str, str], payload: dict[str, Any]) -> None:
    """Emit :data:`EVENT` to the Prefect API of this process's settings."""
    from prefect.events import emit_event

    emit_event(EVENT, resource=resource, payload=payload)


class ReadyEvents:
    """Calls ``emit`` when the unclaimed feedback reaches another multiple of ``batch_size``.

    Args:
        batch_size: Records per training batch (> 0).
        resource_id: The event's resource id.
        emit: ``emit(resource, payload)`` (default: :func:`emit_prefect_event`).
        trainer: The :data:`TRAINER_LABEL` value.
        trigger: More payload: the parameters of the train flow run to start.
    """

    def __init__(
        self,
        batch_size: int,
        resource_id: str,
        emit: Callable[[dict[str, str], dict[str, Any]], None] = emit_prefect_event,
        trainer: str = "run",
        trigger: dict[str, Any] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.resource = {"prefect.resource.id": resource_id, TRAINER_LABEL: trainer}
        self.trigger = dict(trigger or {})
        self.emit = emit
        self._level = 0

    def __call__(self, pending: int) -> None:
        """Note ``pending`` unclaimed records (after a new one arrived)."""
        level = pending // self.batch_size
        if level > self._level:
            payload = {"pending": pending, "batch_size": self.batch_size, **self.trigger}
            self.emit(self.resource, payload)
        self._level = level
