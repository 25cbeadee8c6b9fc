"""The local Prefect server's SQLite write transactions wait for each other (no 503s)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from prefect.server.database.configurations import AioSqliteConfiguration

from infra.ops import prefect_server_main


async def read_then_write_while_another_commits(db: Path) -> int:
    """What the server's task-run creation does while its recorders write: rows in the end."""
    config = AioSqliteConfiguration(connection_url=f"sqlite+aiosqlite:///{db}")
    engine = await config.engine()
    async with engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE runs (id INTEGER)"))

    async def other_writer() -> None:
        session = await config.session(engine)
        async with session, config.begin_transaction(session):
            await session.execute(sa.text("INSERT INTO runs VALUES (2)"))

    first = await config.session(engine)
    async with first:
        async with config.begin_transaction(first):
            await first.execute(sa.text("SELECT count(*) FROM runs"))
            other = asyncio.create_task(other_writer())
            await asyncio.sleep(0.5)  # the other connection commits now unless it waits
            await first.execute(sa.text("INSERT INTO runs VALUES (1)"))
        await other
        rows = (await first.execute(sa.text("SELECT count(*) FROM runs"))).scalar_one()
    await engine.dispose()
    return int(rows)


@pytest.fixture
def restore_prefect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the patch after the test (it applies to the class, process-wide)."""
    original = AioSqliteConfiguration.begin_transaction
    monkeypatch.setattr(AioSqliteConfiguration, "begin_transaction", original)


def test_prefect_as_shipped_fails_the_write_at_once(restore_prefect: None, tmp_path: Path) -> None:
    # the reason for the launcher: if Prefect fixes this, the launcher can go
    with pytest.raises(sa.exc.OperationalError, match="database is locked"):
        asyncio.run(read_then_write_while_another_commits(tmp_path / "shipped.db"))


def test_with_the_launcher_both_writes_land(restore_prefect: None, tmp_path: Path) -> None:
    assert prefect_server_main.write_transactions_wait()
    assert prefect_server_main.write_transactions_wait()  # applying twice is harmless
    assert asyncio.run(read_then_write_while_another_commits(tmp_path / "patched.db")) == 2
