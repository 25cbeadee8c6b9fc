"""What ``gpu_check.py --system`` observes around a run of the real CLI: per-process GPU
memory (``nvidia-smi``, sampled while the run lasts), the device each worker reported in the
run log, and the run itself (a subprocess in its own session, killed at its time limit)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

#: The query whose answer is sampled (one ``pid, used_memory`` row per compute process).
NVIDIA_SMI = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"]
#: ``device actor 0: cuda:0 (GPU ids [0] on node 1a2b3c4d, CUDA_VISIBLE_DEVICES=0, pid 1234)``
DEVICE_LINE = re.compile(
    r"\bdevice (?P<group>[a-z_]+) (?P<rank>\d+): (?P<device>[\w:]+)(?P<rest>.*)"
)
NOT_REPORTED = "not reported (no 'device <group> <rank>: ...' line in the run log)"


def parse_nvidia_smi(text: str) -> dict[int, float]:
    """``{pid: MiB}`` from the CSV answer of :data:`NVIDIA_SMI` (header and odd rows skipped)."""
    usage: dict[int, float] = {}
    for row in text.splitlines():
        fields = [f.strip() for f in row.split(",")]
        if len(fields) != 2 or not fields[0].isdigit():
            continue
        number = re.match(r"[\d.]+", fields[1])
        if number:
            usage[int(fields[0])] = float(number.group())
    return usage


class GpuMemorySampler:
    """Samples :data:`NVIDIA_SMI` every ``interval`` seconds in a thread; keeps each
    process's peak. Without ``nvidia-smi`` it samples nothing and says so in :meth:`result`.
    """

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.available = shutil.which("nvidia-smi") is not None
        self.peak_mib: dict[int, float] = {}
        self.samples = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> GpuMemorySampler:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def sample(self) -> dict[int, float]:
        """One ``{pid: MiB}`` reading (empty without ``nvidia-smi`` or on its failure)."""
        if not self.available:
            return {}
        try:
            out = subprocess.run(NVIDIA_SMI, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return {}
        if out.returncode != 0:
            self.error = (out.stderr or out.stdout).strip()[-300:]
        return parse_nvidia_smi(out.stdout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid, mib in self.sample().items():
                self.peak_mib[pid] = max(mib, self.peak_mib.get(pid, 0.0))
            self.samples += 1
            self._stop.wait(self.interval)

    def result(self, workers: dict[int, str]) -> dict[str, Any] | str:
        """Peak MiB per process seen, named by worker where its pid is known."""
        if not self.available:
            return "not sampled (no nvidia-smi on PATH)"
        procs = [
            {"pid": pid, "worker": workers.get(pid, "?"), "peak_mib": mib}
            for pid, mib in sorted(self.peak_mib.items())
        ]
        out: dict[str, Any] = {"samples": self.samples, "processes": procs}
        out["total_peak_mib"] = sum(p["peak_mib"] for p in procs)
        if self.error:
            out["error"] = self.error
        return out


def parse_device_lines(text: str) -> list[dict[str, Any]]:
    """The workers' device lines of a run log, one dict each (last line per worker wins)."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        match = DEVICE_LINE.search(line)
        if not match:
            continue
        rest = match["rest"]
        entry: dict[str, Any] = {"worker": f"{match['group']} {match['rank']}"}
        entry["device"] = match["device"]
        ids = re.search(r"GPU ids \[([^\]]*)\]", rest)
        if ids:
            entry["gpu_ids"] = [int(float(i)) for i in re.findall(r"[\d.]+", ids[1])]
        for key, pattern in (
            ("node", r"on node (\w+)"),
            ("cuda_visible_devices", r"CUDA_VISIBLE_DEVICES=([^,)]*)"),
            ("pid", r"pid (\d+)"),
        ):
            value = re.search(pattern, rest)
            if value:
                entry[key] = int(value[1]) if key == "pid" else value[1]
        found[entry["worker"]] = entry
    return list(found.values())


def worker_devices(log: Path) -> list[dict[str, Any]] | str:
    """:func:`parse_device_lines` of ``log``, or why there are none."""
    if not log.exists():
        return f"not reported (no run log at {log})"
    return parse_device_lines(log.read_text(errors="replace")) or NOT_REPORTED


def progress_values(log: Path, key: str) -> list[float]:
    """The ``key`` figure of each progress line (``iter N/M | ... | key 0.52 | ...``) of
    ``log``, in order (empty without a log or such lines)."""
    if not log.exists():
        return []
    pattern = re.compile(rf"\biter \d+/\d+ \|.*\| {re.escape(key)} (-?[0-9.]+)")
    return [float(m.group(1)) for m in pattern.finditer(log.read_text(errors="replace"))]


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with ``start_new_session`` and everything in its session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def run_command(
    cmd: list[str], env: dict[str, str], cwd: Path, timeout: float, output: Path
) -> dict[str, Any]:
    """Run ``cmd`` to its end or its time limit, output to ``output``.

    Returns:
        ``exit_code`` (None when killed at the limit), ``timed_out``, ``seconds``.
    """
    started = time.perf_counter()
    with open(output, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            code = None
    return {
        "exit_code": code,
        "timed_out": code is None,
        "seconds": round(time.perf_counter() - started, 1),
    }


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
