"""A checkpoint store that ran out of space (or hit a file-size limit) stops the run.

Retrying cannot help until someone frees space, and the commit protocol (the manifest is
written last) leaves the last committed checkpoint intact, so the run stops with one line
that says so and how to continue (:class:`CheckpointStorageFull`).
"""

from __future__ import annotations

import errno

#: ``errno`` values meaning the store cannot take more bytes: no space left, a file larger
#: than the process may write (``RLIMIT_FSIZE``), the user's disk quota exceeded.
STORAGE_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


class CheckpointStorageFull(RuntimeError):
    """A checkpoint could not be written because its store is full; the run stops."""


def storage_full_cause(exc: BaseException) -> OSError | None:
    """The :class:`OSError` of a full store behind ``exc``, if there is one.

    Follows Ray's wrapper of a worker's exception (its ``cause``) and the chain of
    ``__cause__``/``__context__``.

    Args:
        exc: The exception a checkpoint write raised (in this process or in a worker).

    Returns:
        The first ``OSError`` in the chain whose ``errno`` is one of
        :data:`STORAGE_FULL_ERRNOS`, else None.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in STORAGE_FULL_ERRNOS:
            return current
        ray_cause = getattr(current, "cause", None)  # RayTaskError (duck-typed)
        pending += [
            ray_cause if isinstance(ray_cause, BaseException) else None,
            current.__cause__,
            current.__context__,
        ]
    return None


def storage_full_message(cause: OSError, step: int, committed: int | None, store: str) -> str:
    """The one line a run stopped by a full store reports.

    Args:
        cause: The store's error.
        step: The iteration whose checkpoint was not written.
        committed: The last committed checkpoint's step (None: none yet).
        store: Where the checkpoints go (a folder or URI).
    """
    what = cause.strerror or str(cause)
    where = f" ({cause.filename})" if cause.filename else ""
    kept = (
        f"the checkpoint of iteration {committed} is intact: free space and rerun the same "
        "command to resume from it"
        if committed is not None
        else "no checkpoint was committed yet: free space and rerun the same command"
    )
    return f"checkpoint of iteration {step} not written to {store}: {what}{where}; {kept}"
