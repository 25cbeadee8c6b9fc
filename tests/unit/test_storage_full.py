"""A full checkpoint store: recognising its error behind wrappers, the one-line message,
and the ``disk_full`` fault that produces the real error (a file-size limit)."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from infra.checkpoint.storage_full import storage_full_cause, storage_full_message
from rl_core.reliability import FaultSpecError, parse_faults

ROOT = Path(__file__).resolve().parents[2]


class RayWrapped(RuntimeError):
    """Like Ray's RayTaskError: the worker's exception is its ``cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("wrapped")
        self.cause = cause


def test_the_full_store_error_is_found_behind_ray_and_exception_chains() -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "/data/ckpt/model.safetensors")
    assert storage_full_cause(RayWrapped(full)) is full
    try:
        try:
            raise full
        except OSError as exc:
            raise RuntimeError("saving failed") from exc
    except RuntimeError as outer:
        assert storage_full_cause(outer) is full
    too_large = OSError(errno.EFBIG, "File too large")
    assert storage_full_cause(RayWrapped(RuntimeError("x"))) is None
    assert storage_full_cause(too_large) is too_large
    assert storage_full_cause(OSError(errno.EACCES, "Permission denied")) is None


def test_the_message_names_the_intact_checkpoint_and_what_to_do() -> None:
    cause = OSError(errno.ENOSPC, "No space left on device", "/d/step_000004/a.pt")
    line = storage_full_message(cause, 4, 2, "/d")
    assert line == (
        "checkpoint of iteration 4 not written to /d: No space left on device "
        "(/d/step_000004/a.pt); the checkpoint of iteration 2 is intact: free space and "
        "rerun the same command to resume from it"
    )
    first = storage_full_message(OSError(errno.EDQUOT, "Disk quota exceeded"), 2, None, "s3://b")
    assert first.endswith("no checkpoint was committed yet: free space and rerun the same command")


def test_disk_full_strikes_the_checkpoint_step_only() -> None:
    assert [str(f) for f in parse_faults("disk_full:checkpoint@3").faults] == [
        "disk_full:checkpoint@3"
    ]
    with pytest.raises(FaultSpecError, match="disk_full strikes the checkpoint step only"):
        parse_faults("disk_full:update@1")


SCOPE = """
import errno, resource, sys
from infra.cluster.worker_faults import fault_scope
before = resource.getrlimit(resource.RLIMIT_FSIZE)
path = sys.argv[1]
with fault_scope("disk_full", "test"):
    try:
        with open(path, "wb") as out:
            out.write(b"x" * 4096)
    except OSError as exc:
        print("error", errno.errorcode[exc.errno])
assert resource.getrlimit(resource.RLIMIT_FSIZE) == before
with open(path, "wb") as out:
    out.write(b"x" * 4096)
print("after", len(open(path, "rb").read()))
"""


def test_the_disk_full_fault_makes_writes_fail_for_its_step_only(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCOPE, str(tmp_path / "big.bin")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["error EFBIG", "after 4096"], proc.stdout
