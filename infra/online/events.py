"""The Prefect event an online server emits when a batch of feedback is ready.

Each time the feedback records no batch has claimed yet reach a multiple of the batch size,
``rlpipe.feedback.ready`` is emitted for the resource ``rlpipe.online.<run name>`` with the
count in its payload: an automation can start a training iteration on it. Claims lower the
count, so the next batch fires again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EVENT = "rlpipe.feedback.ready"


def emit_prefect_event(resource_id: str, payload: dict[str, Any]) -> None:
    """Emit :data:`EVENT` to the Prefect API of this process's settings."""
    from prefect.events import emit_event

    emit_event(EVENT, resource={"prefect.resource.id": resource_id}, payload=payload)


class ReadyEvents:
    """Calls ``emit`` when the unclaimed feedback reaches another multiple of ``batch_size``.

    Args:
        batch_size: Records per training batch (> 0).
        resource_id: The event's resource id.
        emit: ``emit(resource_id, payload)`` (default: :func:`emit_prefect_event`).
    """

    def __init__(
        self,
        batch_size: int,
        resource_id: str,
        emit: Callable[[str, dict[str, Any]], None] = emit_prefect_event,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.resource_id = resource_id
        self.emit = emit
        self._level = 0

    def __call__(self, pending: int) -> None:
        """Note ``pending`` unclaimed records (after a new one arrived)."""
        level = pending // self.batch_size
        if level > self._level:
            self.emit(self.resource_id, {"pending": pending, "batch_size": self.batch_size})
        self._level = level
