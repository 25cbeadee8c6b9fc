"""A copy of the feedback store in object storage (S3), written before each answer returns.

With ``online.mirror`` set, every served generation, every feedback record and every batch
claim is also written as one small JSON object under the mirror's URI (``s3://bucket/prefix``
or a local folder; credentials and endpoint from the environment, as for checkpoints):

    generations/<request id>.json    the completion: tokens, log-probs, version, variant
    feedback/<request id>.json       the user's verdict and when it arrived
    claims/<run>/<batch>.json        the request ids of a training batch, in order

The store writes its SQLite row first, then the object, and only then answers: an answered
request is in both. Writes are idempotent (a retried request writes the same object again).
When the database file is lost, :func:`restore_store` rebuilds it from the mirror with the
same batches, so training resumes on exactly the records it had claimed.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.checkpoint.store import open_store

if TYPE_CHECKING:
    from kinds.online.store import FeedbackStore, Generation
    from rl_core.online.feedback import Feedback

logger = logging.getLogger(__name__)


def _batch_name(batch: int) -> str:
    return f"{batch:08d}.json"


class StoreMirror:
    """Writes the store's records to ``uri`` and reads them back.

    Args:
        uri: ``s3://bucket/prefix`` or a local folder.
    """

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.store = open_store(uri)

    def put_generation(self, gen: Generation) -> None:
        """Write a served completion."""
        self._put(f"generations/{gen.request_id}.json", asdict(gen))

    def put_feedback(self, feedback: Feedback, received: float) -> None:
        """Write a feedback record (the same object again on a client's retry)."""
        body = {
            "request_id": feedback.request_id,
            "accepted": feedback.accepted,
            "score": feedback.score,
            "edited_text": feedback.edited_text,
            "received": received,
        }
        self._put(f"feedback/{feedback.request_id}.json", body)

    def put_claim(self, run: str, batch: int, request_ids: list[str]) -> None:
        """Write which records a training batch holds."""
        self._put("/".join(("claims", run, _batch_name(batch))), {"request_ids": request_ids})

    def _put(self, relpath: str, body: dict[str, Any]) -> None:
        self.store.write_bytes(relpath, json.dumps(body, sort_keys=True).encode())

    def _read_all(self, folder: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (path, json.loads(self.store.read_bytes(path)))
            for path in self.store.list_files(folder)
            if path.endswith(".json")
        ]

    def restore_into(self, store: FeedbackStore) -> dict[str, int]:
        """Fill an empty ``store`` with the mirror's records; counts of what was restored."""
        from kinds.online.store import Generation
        from rl_core.online.feedback import Feedback

        generations = [Generation(**body) for _, body in self._read_all("generations")]
        verdicts = sorted(
            (body for _, body in self._read_all("feedback")),
            key=lambda b: (b["received"], b["request_id"]),
        )
        claims: dict[str, tuple[str, int]] = {}
        for path, body in self._read_all("claims"):
            _, run, name = path.rsplit("/", 2)
            for request_id in body["request_ids"]:
                claims[request_id] = (run, int(name.removesuffix(".json")))
        store.load_records(
            generations,
            [
                (
                    Feedback(
                        b["request_id"],
                        accepted=b["accepted"],
                        score=b["score"],
                        edited_text=b["edited_text"],
                    ),
                    b["received"],
                    claims.get(b["request_id"]),
                )
                for b in verdicts
            ],
        )
        return {"generations": len(generations), "feedback": len(verdicts), "claimed": len(claims)}


def restore_store(path: str | Path, mirror_uri: str) -> dict[str, int] | None:
    """Rebuild the database file ``path`` from the mirror when the file is missing.

    Returns:
        What was restored, or None (the file exists: nothing to do).
    """
    from kinds.online.store import FeedbackStore

    path = Path(path)
    if path.exists():
        return None
    mirror = StoreMirror(mirror_uri)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.restoring")
    store = FeedbackStore(partial)
    try:
        counts = mirror.restore_into(store)
    finally:
        store.close()
    try:
        os.link(partial, path)  # only if still missing: another process may have restored it
    except FileExistsError:
        return None
    finally:
        partial.unlink()
    logger.warning(
        "feedback store %s was missing: restored %d generations, %d feedback records and %d "
        "claimed records from %s",
        path,
        counts["generations"],
        counts["feedback"],
        counts["claimed"],
        mirror_uri,
    )
    return counts
