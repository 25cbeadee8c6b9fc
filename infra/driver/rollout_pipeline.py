"""Batches collected ahead of the trainer (``run.mode: async``).

At iteration ``k`` the driver launches the collection of batch ``k + N`` (``N`` =
``algorithm.max_staleness``) with the weights just synced (version ``v_k``), then takes
batch ``k``, launched ``N`` iterations earlier with ``v_{k-N}``. The env workers' call
queues hold the launched batches (at most ``N`` ahead: the bound of the buffer) and Ray's
object store their results, so env workers step while the trainer updates. Each batch is
pinned to the version it was launched with: every action of it is sampled with exactly
those weights (rollout workers keep the last ``N + 1`` versions), so which version a batch
used does not depend on timing, and a run is reproducible. ``N = 0`` launches and takes the
same batch: sync mode.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from infra.checkpoint.layout import PIPELINE_FILE, TORCH_DATA, StatePart

#: Wall-clock fields of a batch's statistics (not checkpointed).
TIMINGS = ("seconds", "env_seconds", "started_at", "finished_at")


@dataclass
class Chunk:
    """One launched batch: per env worker a ``(batch, stats)`` pair of ObjectRefs.

    Attributes:
        index: The iteration that takes it.
        version: The weight version its actions are sampled with.
        pairs: ``(batch_ref, stats_ref)`` per env worker.
    """

    index: int
    version: int
    pairs: list[tuple[Any, Any]]


@dataclass
class RolloutPipeline:
    """The launched, not yet taken batches, in launch order.

    Attributes:
        staleness: ``algorithm.max_staleness``: how far ahead batches are launched.
        chunks: Launched batches, oldest first.
        next_index: The iteration the next launched batch is for.
        last_finished: Per env worker, when its previous batch ended (for idle time).
    """

    staleness: int
    chunks: deque[Chunk] = field(default_factory=deque)
    next_index: int = 0
    last_finished: dict[int, float] = field(default_factory=dict)
    versions: dict[int, int] = field(default_factory=dict)

    def fill(self, iteration: int, version: int, launch: Callable[[int, int], list]) -> int:
        """Launch batches up to iteration ``iteration + staleness``.

        A batch launched again after :meth:`rewind` keeps the version it was first launched
        with; a new one gets ``version``.

        Args:
            iteration: The iteration about to take its batch.
            version: The weight version the rollout workers were just synced to.
            launch: ``launch(index, version)`` starts one batch and returns its pairs.

        Returns:
            How many batches were launched.
        """
        self.next_index = max(self.next_index, iteration)
        launched = 0
        while self.next_index <= iteration + self.staleness:
            index = self.next_index
            pinned = self.versions.setdefault(index, version)
            self.chunks.append(Chunk(index, pinned, launch(index, pinned)))
            self.next_index += 1
            launched += 1
        for old in [i for i in self.versions if i < iteration]:
            del self.versions[old]
        return launched

    def take(self, iteration: int) -> Chunk:
        """The batch of ``iteration`` (the oldest launched one).

        Raises:
            RuntimeError: The oldest batch belongs to another iteration.
        """
        chunk = self.chunks.popleft()
        if chunk.index != iteration:
            raise RuntimeError(
                f"the oldest collected batch is for iteration {chunk.index}, not {iteration}"
            )
        return chunk

    def idle_seconds(self, stats: list[dict[str, Any]]) -> float:
        """Longest wait of an env worker between its previous batch and this one.

        Batches restored from a checkpoint carry no timings and count no wait.
        """
        gaps = [
            max(0.0, s["started_at"] - self.last_finished[rank])
            for rank, s in enumerate(stats)
            if rank in self.last_finished and "started_at" in s
        ]
        self.last_finished.update(
            {rank: s["finished_at"] for rank, s in enumerate(stats) if "finished_at" in s}
        )
        return max(gaps, default=0.0)

    def refs(self) -> list[Any]:
        """Every ObjectRef of the launched batches."""
        return [ref for chunk in self.chunks for pair in chunk.pairs for ref in pair]

    def drain(self, timeout: float | None = None) -> None:
        """Wait until every launched batch is collected (results stay in the store)."""
        refs = self.refs()
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=timeout)

    # -- snapshots and checkpoints ---------------------------------------------------------
    def snapshot(self) -> tuple[list[Chunk], int]:
        """What :meth:`restore` starts from (the launched batches and the next index)."""
        return list(self.chunks), self.next_index

    def restore(self, kept: tuple[list[Chunk], int]) -> int | None:
        """Undo a failed step: keep the batches that were collected, forget the rest.

        The batches of ``kept`` and those launched since are taken in order; from the first
        one that failed (or the first of those launched since, when they all succeeded but
        the step failed after launching) every later batch is forgotten.

        Returns:
            The index of the first forgotten batch, whose previous env and sampling state
            the caller puts back (None: nothing forgotten).
        """
        chunks, next_index = kept
        since = [c for c in self.chunks if c.index >= next_index]
        self.chunks = deque(chunks + since)
        self.next_index = next_index + len(since)
        return self.forget_failed()

    def forget_failed(self) -> int | None:
        """Forget the first launched batch that failed and every later one.

        Returns:
            The first forgotten index (None: none failed); the caller puts back the env
            and sampling state from before it.
        """
        ordered = list(self.chunks)
        first_bad = next((i for i, c in enumerate(ordered) if _failed(c)), None)
        if first_bad is None:
            return None
        self.chunks = deque(ordered[:first_bad])
        self.next_index = ordered[first_bad].index
        return self.next_index

    def relaunch_forgotten(self, launch: Callable[[int, int], list]) -> int:
        """Launch again the batches :meth:`forget_failed` forgot, each with its pinned version.

        A checkpoint calls it so that it holds the batches the run would have collected: a
        resumed run could not launch them with their versions (older weights are not in the
        checkpoint).

        Args:
            launch: ``launch(index, version)`` starts one batch and returns its pairs.

        Returns:
            How many batches were launched.
        """
        launched = 0
        while self.next_index in self.versions:
            index = self.next_index
            version = self.versions[index]
            self.chunks.append(Chunk(index, version, launch(index, version)))
            self.next_index += 1
            launched += 1
        return launched

    def settle(
        self,
        timeout: float | None,
        launch: Callable[[int, int], list],
        rewind: Callable[[int], None],
    ) -> None:
        """Make the launched batches what a checkpoint holds: collected, none failed.

        Waits for them; batches that failed are forgotten (``rewind(index)`` puts back the
        state from before the first) and launched again with their pinned versions, then
        waited for: the checkpoint holds what the run goes on with.

        Raises:
            RuntimeError: A batch failed again (the checkpoint step is retried).
        """
        self.drain(timeout)
        forgotten = self.forget_failed()
        if forgotten is None:
            return
        rewind(forgotten)
        self.relaunch_forgotten(launch)
        self.drain(timeout)
        again = self.forget_failed()
        if again is not None:
            rewind(again)
            raise RuntimeError(f"the batch of iteration {again} failed twice; not checkpointed")

    def to_state(self) -> dict[str, Any]:
        """The launched batches' data (collected first) for a checkpoint.

        Their wall-clock timings are left out: a checkpoint holds what training depends on,
        so two runs that trained the same write the same file.
        """

        def kept(pair: list[Any]) -> list[Any]:
            batch, stats = ray.get(list(pair))
            return [batch, {k: v for k, v in stats.items() if k not in TIMINGS}]

        chunks = [
            {"index": c.index, "version": c.version, "pairs": [kept(pair) for pair in c.pairs]}
            for c in self.chunks
        ]
        return {"next_index": self.next_index, "chunks": chunks}

    def load_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`to_state` returned (the data goes into the object store)."""
        self.next_index = int(state["next_index"])
        self.chunks = deque(
            Chunk(
                int(c["index"]),
                int(c["version"]),
                [(ray.put(batch), ray.put(stats)) for batch, stats in c["pairs"]],
            )
            for c in state["chunks"]
        )
        self.last_finished = {}


def pipeline_part(
    state: Callable[[], dict[str, Any]], load: Callable[[dict[str, Any] | None, int], None]
) -> StatePart:
    """The launched batches as a checkpoint part (:data:`~infra.checkpoint.layout.PIPELINE_FILE`).

    Args:
        state: The settled pipeline's :meth:`RolloutPipeline.to_state` (waits for it).
        load: Puts back a pipeline from that state and the checkpoint's step (None: the
            folder holds none, a sync run's checkpoint).
    """
    return StatePart(PIPELINE_FILE, TORCH_DATA, state, load, optional=True)


def pipeline_from_state(state: dict[str, Any] | None, staleness: int, step: int) -> RolloutPipeline:
    """The pipeline a checkpoint holds; an empty one starting at ``step`` when it has none."""
    pipeline = RolloutPipeline(staleness)
    if state is not None:
        pipeline.load_state(state)
    else:
        pipeline.next_index = step
    return pipeline


def _failed(chunk: Chunk) -> bool:
    """Whether collecting ``chunk`` raised (its results are ready: the caller drained)."""
    for _, stats in chunk.pairs:
        try:
            ray.get(stats, timeout=0)
        except Exception:  # noqa: BLE001 - any error means the batch must be collected again
            return True
    return False
