"""Run lease (one writer per run) on a local folder and on a real S3 server (moto_server)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import psutil
import pytest

from infra.checkpoint import lease_holder
from infra.checkpoint.lease import (
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    RunLease,
    open_lease_backend,
)
from infra.checkpoint.lease_holder import holder_record, holder_text, stale_reason
from infra.checkpoint.lease_local import LocalLeaseBackend
from infra.checkpoint.s3_lease import S3LeaseBackend

RUN = "lease-demo"


@pytest.fixture(params=["local", "s3"])
def store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    """A run's checkpoint store: a local folder, or a prefix in a fresh moto bucket."""
    if request.param == "local":
        return str(tmp_path / RUN / "checkpoints")
    return f"s3://{request.getfixturevalue('s3_bucket')}/runs/{RUN}"


def foreign_record(renewed_ago_s: float, ttl_s: float = 60.0) -> dict:
    """A lease record of a process on another host, last renewed ``renewed_ago_s`` ago."""
    record = holder_record(RUN, "f" * 32, ttl_s)
    renewed = datetime.now(UTC) - timedelta(seconds=renewed_ago_s)
    record.update(
        host="trainer-elsewhere",
        pid=4242,
        acquired_at=(renewed - timedelta(hours=1)).isoformat(),
        renewed_at=renewed.isoformat(),
        prefect_flow_run_url="http://prefect.example/flow-runs/flow-run/abc",
    )
    return record


def stored_record(store_uri: str) -> dict:
    snapshot = open_lease_backend(store_uri).read()
    assert snapshot is not None and snapshot.record is not None
    return snapshot.record


def test_backend_follows_the_store_scheme(tmp_path, s3_bucket) -> None:
    local = open_lease_backend(str(tmp_path / "store"))
    assert isinstance(local, LocalLeaseBackend)
    assert local.uri == str(tmp_path / "store" / "lease.json")
    remote = open_lease_backend(f"s3://{s3_bucket}/runs/x/")
    assert isinstance(remote, S3LeaseBackend)
    assert remote.uri == f"s3://{s3_bucket}/runs/x/lease.json"
    with pytest.raises(LeaseError, match=r"no run lease for checkpoint store 'gs://b/x'"):
        open_lease_backend("gs://b/x")


def test_second_acquirer_is_refused_naming_the_holder(store_uri: str) -> None:
    with RunLease(store_uri, RUN, ttl_s=30) as first:
        with pytest.raises(LeaseHeldError) as refused:
            RunLease(store_uri, RUN, ttl_s=30).acquire()
        message = str(refused.value)
        assert message.startswith(
            f"run '{RUN}' is being trained by host {socket.gethostname()} pid {os.getpid()} since "
        )
        assert message.endswith("UTC (not in a Prefect flow run); wait for it to finish or stop it")
        assert "\n" not in message
        assert refused.value.holder["lease_id"] == first.lease_id
        assert stored_record(store_uri)["lease_id"] == first.lease_id


def test_released_lease_is_reacquired(store_uri: str) -> None:
    first = RunLease(store_uri, RUN, ttl_s=30).acquire()
    first.release()
    assert open_lease_backend(store_uri).read() is None
    first.release()  # idempotent
    with RunLease(store_uri, RUN, ttl_s=30) as second:
        assert second.held
        assert stored_record(store_uri)["lease_id"] == second.lease_id


def test_lease_of_a_dead_process_on_this_host_is_taken_over(store_uri: str, caplog) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = psutil.Process(proc.pid).create_time()
    proc.kill()
    proc.wait()
    record = holder_record(RUN, "d" * 32, 60.0)
    record.update(pid=proc.pid, process_start=started)
    assert open_lease_backend(store_uri).create(record) is not None

    with caplog.at_level(logging.WARNING, logger="infra.checkpoint.lease"):
        lease = RunLease(store_uri, RUN, ttl_s=30).acquire()
    try:
        assert stored_record(store_uri)["lease_id"] == lease.lease_id
        assert f"process {proc.pid} is not running" in caplog.text
    finally:
        lease.release()


def test_lease_of_a_reused_pid_is_taken_over(store_uri: str, caplog) -> None:
    record = holder_record(RUN, "r" * 32, 60.0)  # our pid, but "started" an hour earlier
    record["process_start"] = record["process_start"] - 3600
    assert open_lease_backend(store_uri).create(record) is not None
    with caplog.at_level(logging.WARNING, logger="infra.checkpoint.lease"):
        with RunLease(store_uri, RUN, ttl_s=30) as lease:
            assert stored_record(store_uri)["lease_id"] == lease.lease_id
    assert "now belongs to another process" in caplog.text


def test_live_process_on_this_host_keeps_its_lease_however_old(store_uri: str) -> None:
    record = holder_record(RUN, "a" * 32, 1.0)
    record["renewed_at"] = "2000-01-01T00:00:00+00:00"  # alive: age does not matter
    assert open_lease_backend(store_uri).create(record) is not None
    with pytest.raises(LeaseHeldError, match=rf"pid {os.getpid()} since"):
        RunLease(store_uri, RUN, ttl_s=30).acquire()


def test_fresh_lease_of_another_host_is_refused(store_uri: str) -> None:
    assert open_lease_backend(store_uri).create(foreign_record(renewed_ago_s=5)) is not None
    with pytest.raises(LeaseHeldError) as refused:
        RunLease(store_uri, RUN, ttl_s=30).acquire()
    assert str(refused.value) == (
        f"run '{RUN}' is being trained by host trainer-elsewhere pid 4242 since "
        f"{refused.value.holder['acquired_at'][:10]} "
        f"{refused.value.holder['acquired_at'][11:19]} UTC (Prefect flow run "
        "http://prefect.example/flow-runs/flow-run/abc); wait for it to finish or stop it"
    )
    assert stored_record(store_uri)["host"] == "trainer-elsewhere"


def test_stale_lease_of_another_host_is_taken_over(store_uri: str, caplog) -> None:
    # ttl 1 s: on S3 the age is measured on the server's clock, so let it really pass
    assert open_lease_backend(store_uri).create(foreign_record(600, ttl_s=1.0)) is not None
    time.sleep(2.2)
    with caplog.at_level(logging.WARNING, logger="infra.checkpoint.lease"):
        with RunLease(store_uri, RUN, ttl_s=30) as lease:
            record = stored_record(store_uri)
            assert record["lease_id"] == lease.lease_id
            assert record["host"] == socket.gethostname()
    assert "from host trainer-elsewhere pid 4242" in caplog.text
    assert "not renewed for" in caplog.text


def test_renewal_keeps_the_lease_fresh_and_a_silent_holder_loses_it(
    store_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = RunLease(store_uri, RUN, ttl_s=2.0).acquire()  # renewed every 0.5 s
    try:
        time.sleep(3.0)  # longer than the TTL
        record = stored_record(store_uri)
        assert record["renewed_at"] > record["acquired_at"]
        # seen from another host, the lease is fresh: refused
        monkeypatch.setattr(lease_holder.socket, "gethostname", lambda: "trainer-elsewhere")
        with pytest.raises(LeaseHeldError, match=r"wait for it to finish or stop it"):
            RunLease(store_uri, RUN, ttl_s=2.0).acquire()
        # the holder stops renewing (as a hung or cut-off host would): taken over after the TTL
        first._stop.set()
        first._thread.join()
        time.sleep(3.2)
        with RunLease(store_uri, RUN, ttl_s=2.0) as second:
            assert stored_record(store_uri)["lease_id"] == second.lease_id
            with pytest.raises(LeaseLostError, match=r"was taken over by host trainer-elsewhere"):
                first.renew()
            with pytest.raises(LeaseLostError):
                first.check()
            first.release()  # must not delete the new holder's lease
            assert stored_record(store_uri)["lease_id"] == second.lease_id
    finally:
        first.release()


def test_unreadable_lease_fails_with_what_to_do(tmp_path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "lease.json").write_text("{not json")
    with pytest.raises(LeaseError, match=r"lease\.json is unreadable; if no process trains run"):
        RunLease(str(folder), RUN).acquire()


def test_local_lease_file_is_a_complete_record(tmp_path) -> None:
    with RunLease(str(tmp_path), RUN, ttl_s=40) as lease:
        record = json.loads((tmp_path / "lease.json").read_text())
    assert record["lease_id"] == lease.lease_id
    assert record["ttl_s"] == 40
    assert record["pid"] == os.getpid()
    assert record["process_start"] == pytest.approx(psutil.Process().create_time(), abs=1)
    assert {"prefect_flow_run_id", "prefect_flow_run_url", "acquired_at", "renewed_at"} <= set(
        record
    )
    assert not (tmp_path / "lease.json").exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_holder_text_and_stale_reason() -> None:
    holder = foreign_record(renewed_ago_s=30, ttl_s=60)
    holder["acquired_at"] = "2026-03-01T08:15:00.123+00:00"
    assert holder_text(holder) == (
        "host trainer-elsewhere pid 4242 since 2026-03-01 08:15:00 UTC "
        "(Prefect flow run http://prefect.example/flow-runs/flow-run/abc)"
    )
    assert stale_reason(holder, None, 60) is None
    assert stale_reason(holder, 61.0, 60) == "not renewed for 61s (TTL 60s)"  # server's age wins
    assert stale_reason(foreign_record(90, ttl_s=60), None, 60).startswith("not renewed for 9")


def test_concurrent_take_over_of_a_stale_local_lease_has_one_winner(tmp_path) -> None:
    store = str(tmp_path / "store")
    assert LocalLeaseBackend(store).create(foreign_record(renewed_ago_s=600)) is not None
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    leases: list[RunLease] = []

    def contend() -> None:
        lease = RunLease(store, RUN, ttl_s=30)
        leases.append(lease)
        barrier.wait()
        try:
            lease.acquire()
            outcomes.append(lease.lease_id)
        except LeaseHeldError:
            outcomes.append("refused")

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o != "refused"]
    assert len(outcomes) == 8 and len(winners) == 1, outcomes
    assert stored_record(store)["lease_id"] == winners[0]
    for lease in leases:
        lease.release()
