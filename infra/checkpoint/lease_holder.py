"""Who holds a run lease, and whether that holder is provably gone."""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime
from typing import Any

import psutil

from infra.processes import pid_alive

logger = logging.getLogger(__name__)

#: Two start times of one process id closer than this are the same process.
START_TIME_TOLERANCE_S = 1.0


def utc_now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def process_start_time(pid: int) -> float | None:
    """Start time (seconds since the epoch) of process ``pid``, or None if it is not running."""
    if not pid_alive(pid):
        return None
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:  # e.g. access denied: alive, start time unknown
        return float("nan")


def current_flow_run() -> tuple[str, str]:
    """``(id, UI URL)`` of the Prefect flow run this code runs in; empty strings outside one."""
    try:
        from prefect.runtime import flow_run
    except ImportError:  # pragma: no cover - prefect is a dependency of rlpipe
        return "", ""
    run_id = str(flow_run.id or "")
    url = str(flow_run.ui_url or "") if run_id else ""
    return run_id, "" if url.startswith("None/") else url  # no PREFECT_UI_URL known


def holder_record(run_name: str, lease_id: str, ttl_s: float) -> dict[str, Any]:
    """The lease record of this process for run ``run_name``."""
    run_id, url = current_flow_run()
    now = utc_now_iso()
    return {
        "run_name": run_name,
        "lease_id": lease_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "process_start": process_start_time(os.getpid()),
        "prefect_flow_run_id": run_id,
        "prefect_flow_run_url": url,
        "acquired_at": now,
        "renewed_at": now,
        "ttl_s": ttl_s,
    }


def holder_text(holder: dict[str, Any]) -> str:
    """``host H pid P since T (Prefect flow run URL)`` for messages."""
    since = _parse_time(holder.get("acquired_at"))
    when = since.strftime("%Y-%m-%d %H:%M:%S UTC") if since else "an unknown time"
    flow = holder.get("prefect_flow_run_url") or holder.get("prefect_flow_run_id")
    where = f"Prefect flow run {flow}" if flow else "not in a Prefect flow run"
    return f"host {holder.get('host', '?')} pid {holder.get('pid', '?')} since {when} ({where})"


def stale_reason(holder: dict[str, Any], age_s: float | None, default_ttl_s: float) -> str | None:
    """Why the holder of a lease is provably gone, or None if it may still be running.

    Args:
        holder: The lease record.
        age_s: Seconds since the lease was last written as measured by its store (S3: the
            server's clock), or None to use the record's ``renewed_at`` and this clock.
        default_ttl_s: TTL to use when the record names none.

    Returns:
        Same host: the process id is dead, or runs a process that started at another time.
        Another host: the lease is older than its TTL. Else None.
    """
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and isinstance(pid, int):
        started = process_start_time(pid)
        if started is None:
            return f"process {pid} is not running"
        recorded = holder.get("process_start")
        if isinstance(recorded, (int, float)) and abs(started - recorded) > START_TIME_TOLERANCE_S:
            return f"process id {pid} now belongs to another process"
        return None
    ttl = float(holder.get("ttl_s") or default_ttl_s)
    if age_s is None:
        renewed = _parse_time(holder.get("renewed_at"))
        if renewed is None:
            return None
        age_s = (datetime.now(UTC) - renewed).total_seconds()
    if age_s > ttl:
        return f"not renewed for {age_s:.0f}s (TTL {ttl:.0f}s)"
    return None


def _parse_time(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
