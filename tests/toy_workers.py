"""A worker for liveness and deadline tests: steps that sleep, hang or hold the GIL.

It lives in an importable module (not a test file) so that Ray workers can load it.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from infra.cluster.dispatch import DEFAULT, Reduce, Split, worker_method
from infra.cluster.worker_base import WorkerBase


class ToyWorker(WorkerBase):
    """Records each step call's thread and time span."""

    group = "toy"

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        super().__init__(config, rank, cpus)
        self.spans: list[tuple[int, float, float]] = []

    def work(self, seconds: float) -> int:
        """Sleep ``seconds`` (a busy step); returns the rank."""
        start = time.monotonic()
        time.sleep(seconds)
        self.spans.append((threading.get_ident(), start, time.monotonic()))
        return self.rank

    def hang(self) -> None:
        """Never return (the GIL is released: heartbeats are still answered)."""
        while True:
            time.sleep(0.05)

    def hold_gil(self) -> bool:
        """Backtrack in a regex for minutes without releasing the GIL (no heartbeats)."""
        return re.match(r"(a+)+$", "a" * 40 + "b") is not None

    @worker_method(split=Split.ROWS, reduce=Reduce.CONCAT)
    def tagged(self, rows: list[int], offset: int) -> list[tuple[int, int]]:
        """Each of this worker's rows with its rank, plus ``offset``."""
        return [(self.rank, row + offset) for row in rows]

    @worker_method(reduce={DEFAULT: Reduce.SUM, "rank": Reduce.MAX, "seconds": Reduce.DROP})
    def shares(self, value: float) -> dict[str, float]:
        """A metric share per rank (summed by the driver), the rank and seconds."""
        return {"share": value * (self.rank + 1), "rank": self.rank, "seconds": 0.1}

    @worker_method(split=Split.RANK_ZERO, reduce=Reduce.FIRST)
    def first_rank(self) -> int:
        """The rank of the worker answering (rank 0 only is asked)."""
        return self.rank

    def step_spans(self) -> list[tuple[int, float, float]]:
        """(thread id, start, end) of every finished ``work`` call."""
        return list(self.spans)
