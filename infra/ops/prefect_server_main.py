"""``prefect server start`` with SQLite write transactions that wait instead of failing.

Run as ``python -m infra.ops.prefect_server_main server start --host ... --port ...`` (the
arguments of the ``prefect`` command). :class:`~infra.ops.prefect_api.LocalPrefectServer`
starts the servers rlpipe runs on 127.0.0.1 this way.

Why: Prefect's server opens its SQLite write transactions as ``BEGIN DEFERRED``. A
transaction that reads and then writes while another connection (the server's own event
and task-run recorders) commits in between gets ``SQLITE_BUSY`` at once; SQLite does not
wait out its busy timeout for that case. The server answers 503 and the client retries
after 2 seconds. In a training run that is the subflow's tracking task run, created at
the start of an iteration while the recorders write the previous iteration's task runs:
about one iteration in six paid 2 seconds. ``BEGIN IMMEDIATE`` takes the write lock at
the start, so concurrent writers queue on SQLite's busy timeout (milliseconds here)
instead. Reads outside transactions are unchanged. Other databases (PostgreSQL) are not
affected.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

logger = logging.getLogger(__name__)


def write_transactions_wait() -> bool:
    """Make the SQLite configuration of Prefect's server begin every transaction IMMEDIATE.

    Returns:
        Whether the change applied (False, with a warning, if this Prefect version's
        ``AioSqliteConfiguration.begin_transaction`` has no ``with_for_update`` flag).
    """
    from prefect.server.database.configurations import AioSqliteConfiguration

    original = AioSqliteConfiguration.begin_transaction
    if getattr(original, "_rlpipe_immediate", False):
        return True
    if "with_for_update" not in inspect.signature(original).parameters:
        logger.warning(
            "this Prefect version's SQLite transactions cannot be made IMMEDIATE; "
            "concurrent writes may answer 503 and cost clients a 2 s retry"
        )
        return False

    @asynccontextmanager
    async def begin_immediate(
        self: AioSqliteConfiguration, session: Any, with_for_update: bool = False
    ) -> AsyncIterator[Any]:
        async with original(self, session, with_for_update=True) as transaction:
            yield transaction

    begin_immediate._rlpipe_immediate = True  # type: ignore[attr-defined]
    AioSqliteConfiguration.begin_transaction = begin_immediate  # type: ignore[method-assign]
    return True


def main() -> None:
    """Run the ``prefect`` command line (``sys.argv``) with :func:`write_transactions_wait`."""
    write_transactions_wait()
    from prefect.cli import app

    sys.exit(app())


if __name__ == "__main__":
    main()
