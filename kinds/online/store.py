"""Served generations and their feedback, in one SQLite file that survives any crash.

The server writes a generation (prompt and completion token ids, serve-time log-probs,
weight version) before its response returns, and a feedback record before it answers the
feedback request; both commit with ``synchronous=FULL`` in WAL mode, so an answered request
is on disk. The trainer claims feedback in batches keyed by ``(run, iteration)``: a retried
or resumed iteration gets the same records back, a record is never in two batches, so each
record is trained on exactly once along the run's history.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rl_core.online.feedback import Feedback, FeedbackError

if TYPE_CHECKING:
    from kinds.online.store_mirror import StoreMirror

_SCHEMA = """
create table if not exists generations (
    request_id text primary key,
    created real not null,
    weight_version integer not null,
    variant text not null,
    prompt text not null,
    completion text not null,
    prompt_ids text not null,
    completion_ids text not null,
    logprobs text not null,
    finished integer not null
);
create table if not exists feedback (
    seq integer primary key autoincrement,
    request_id text not null unique references generations(request_id),
    accepted integer,
    score real,
    edited_text text,
    received real not null,
    run text,
    batch integer
);
create index if not exists feedback_batch on feedback(run, batch);
"""


@dataclass(frozen=True)
class Generation:
    """One served completion, as the trainer will use it (no re-tokenization).

    Attributes:
        request_id: The id returned with the completion.
        weight_version: The policy version that generated it.
        variant: ``main`` or, under an A/B split, ``candidate``.
        prompt: The prompt text.
        completion: The completion text.
        prompt_ids: The prompt's token ids.
        completion_ids: The completion's token ids.
        logprobs: The serve-time log-probability of each completion token.
        finished: Whether it ended with the end-of-sequence token.
        created: When it was served (seconds since the epoch).
    """

    request_id: str
    weight_version: int
    variant: str
    prompt: str
    completion: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finished: bool
    created: float = field(default_factory=time.time)


@dataclass(frozen=True)
class FeedbackRecord:
    """A generation with its feedback, as a training batch holds it.

    Attributes:
        seq: Arrival order of the feedback (the order batches take records in).
        generation: The served completion.
        feedback: What the user did with it.
    """

    seq: int
    generation: Generation
    feedback: Feedback


class FeedbackStore:
    """The generations and feedback of a served policy (one SQLite file, thread-safe).

    Args:
        path: The database file (created with its folder when missing).
        mirror: Also write every record there before returning
            (:class:`~kinds.online.store_mirror.StoreMirror`), or None.
    """

    def __init__(self, path: str | Path, mirror: StoreMirror | None = None) -> None:
        self.path = Path(path)
        self.mirror = mirror
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("pragma journal_mode=wal")
        self._db.execute("pragma synchronous=full")
        self._db.execute("pragma foreign_keys=on")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database (every write is already committed)."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``begin immediate``: writers wait, never fail midway)."""
        with self._lock:
            self._db.execute("begin immediate")
            try:
                yield self._db
            except BaseException:
                self._db.execute("rollback")
                raise
            self._db.execute("commit")

    # -- serving --------------------------------------------------------------------------
    def record_generation(self, gen: Generation) -> None:
        """Store a served completion (committed when this returns)."""
        with self._transaction() as db:
            db.execute(
                "insert into generations values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    gen.request_id,
                    gen.created,
                    gen.weight_version,
                    gen.variant,
                    gen.prompt,
                    gen.completion,
                    json.dumps(gen.prompt_ids),
                    json.dumps(gen.completion_ids),
                    json.dumps(gen.logprobs),
                    int(gen.finished),
                ),
            )
        if self.mirror is not None:
            self.mirror.put_generation(gen)

    def generation(self, request_id: str) -> Generation | None:
        """The served completion of ``request_id``, or None."""
        with self._lock:
            row = self._db.execute(
                "select * from generations where request_id = ?", (request_id,)
            ).fetchone()
        return None if row is None else _generation(row)

    def record_feedback(self, feedback: Feedback) -> bool:
        """Store feedback on a served completion (committed when this returns).

        Returns:
            True when recorded now; False when the same feedback was there already (a
            client's retry: nothing changes).

        Raises:
            FeedbackError: No completion was served with that id (404), or different
                feedback for it is there already (409).
        """
        values = (
            None if feedback.accepted is None else int(feedback.accepted),
            feedback.score,
            feedback.edited_text,
        )
        with self._transaction() as db:
            if not db.execute(
                "select 1 from generations where request_id = ?", (feedback.request_id,)
            ).fetchone():
                raise FeedbackError(
                    f"no completion was served with request_id {feedback.request_id!r}",
                    status=404,
                )
            row = db.execute(
                "select accepted, score, edited_text, received from feedback where request_id = ?",
                (feedback.request_id,),
            ).fetchone()
            if row is not None and tuple(row[:3]) != values:
                raise FeedbackError(
                    f"request {feedback.request_id!r} already has different feedback; "
                    "feedback is given once per completion",
                    status=409,
                )
            received = time.time() if row is None else row[3]
            if row is None:
                db.execute(
                    "insert into feedback (request_id, accepted, score, edited_text, received) "
                    "values (?, ?, ?, ?, ?)",
                    (feedback.request_id, *values, received),
                )
        if self.mirror is not None:  # (again on a retry: the first write may have failed)
            self.mirror.put_feedback(feedback, received)
        return row is None

    # -- training -------------------------------------------------------------------------
    def pending(self) -> int:
        """Feedback records no batch has claimed yet."""
        with self._lock:
            return self._db.execute("select count(*) from feedback where batch is null").fetchone()[
                0
            ]

    def claimed(self, run: str, batch: int) -> bool:
        """Whether ``run``'s batch ``batch`` was claimed (its records are kept for it)."""
        with self._lock:
            row = self._db.execute(
                "select 1 from feedback where run = ? and batch = ? limit 1", (run, batch)
            ).fetchone()
        return row is not None

    def claim(self, run: str, batch: int, size: int) -> list[FeedbackRecord] | None:
        """The records of ``run``'s batch ``batch``: claimed now, or those claimed before.

        A batch claimed before (a retried or resumed iteration) comes back unchanged.
        Otherwise the ``size`` oldest unclaimed records become the batch, or, with fewer
        waiting, nothing is claimed.

        Returns:
            The batch's records in arrival order, or None (fewer than ``size`` waiting).
        """
        with self._transaction() as db:
            rows = self._batch_rows(db, run, batch)
            if not rows:
                seqs = [
                    s
                    for (s,) in db.execute(
                        "select seq from feedback where batch is null order by seq limit ?",
                        (size,),
                    )
                ]
                if len(seqs) < size:
                    return None
                db.executemany(
                    "update feedback set run = ?, batch = ? where seq = ?",
                    [(run, batch, s) for s in seqs],
                )
                rows = self._batch_rows(db, run, batch)
        if self.mirror is not None:  # (again on a retry: the first write may have failed)
            self.mirror.put_claim(run, batch, [r.generation.request_id for r in rows])
        return rows

    def load_records(
        self,
        generations: list[Generation],
        feedback: list[tuple[Feedback, float, tuple[str, int] | None]],
    ) -> None:
        """Insert records read back from a mirror (into an empty store).

        Args:
            generations: The served completions.
            feedback: ``(feedback, received, (run, batch) or None)`` in arrival order.
        """
        mirror, self.mirror = self.mirror, None  # (they come from it)
        try:
            for gen in generations:
                self.record_generation(gen)
        finally:
            self.mirror = mirror
        with self._transaction() as db:
            db.executemany(
                "insert into feedback (request_id, accepted, score, edited_text, received, run, "
                "batch) values (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        f.request_id,
                        None if f.accepted is None else int(f.accepted),
                        f.score,
                        f.edited_text,
                        received,
                        *(claim or (None, None)),
                    )
                    for f, received, claim in feedback
                ],
            )

    @staticmethod
    def _batch_rows(db: sqlite3.Connection, run: str, batch: int) -> list[FeedbackRecord]:
        rows = db.execute(
            "select f.seq, f.accepted, f.score, f.edited_text, g.* from feedback f join "
            "generations g on g.request_id = f.request_id where f.run = ? and f.batch = ? "
            "order by f.seq",
            (run, batch),
        ).fetchall()
        return [
            FeedbackRecord(
                seq,
                _generation(gen),
                Feedback(
                    gen[0],
                    accepted=None if accepted is None else bool(accepted),
                    score=score,
                    edited_text=edited,
                ),
            )
            for seq, accepted, score, edited, *gen in rows
        ]

    def acceptance(self) -> dict[tuple[int, str], tuple[int, int]]:
        """Accepted and judged completions (feedback with ``accepted``) per version.

        Returns:
            ``{(weight_version, variant): (accepted, judged)}``.
        """
        with self._lock:
            rows = self._db.execute(
                "select g.weight_version, g.variant, sum(f.accepted), count(*) from feedback f "
                "join generations g on g.request_id = f.request_id where f.accepted is not null "
                "group by g.weight_version, g.variant"
            ).fetchall()
        return {(v, variant): (int(a), int(n)) for v, variant, a, n in rows}


def _generation(row: tuple) -> Generation:
    request_id, created, version, variant, prompt, completion, p_ids, c_ids, lps, done = row
    return Generation(
        request_id,
        int(version),
        variant,
        prompt,
        completion,
        json.loads(p_ids),
        json.loads(c_ids),
        json.loads(lps),
        bool(done),
        float(created),
    )
