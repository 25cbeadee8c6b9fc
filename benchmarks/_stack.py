"""A local stack for benchmarks: ``scripts/stack.py up --ray`` in a temporary home.

Runs launched with :func:`stack_env` use its Prefect API and Ray head (what a user gets with
``bash scripts/stack.sh up --ray`` running), instead of starting their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.processes import free_port  # noqa: E402

#: Variables that point a process at shared services.
SERVICE_VARS = ("PREFECT_API_URL", "RAY_ADDRESS", "MLFLOW_TRACKING_URI")


def stack_env(home: Path | None) -> dict[str, str]:
    """Variables of a run that uses the stack at ``home`` (None: its own services)."""
    if home is None:
        return {"RLPIPE_STACK": "off"}
    return {"RLPIPE_STACK": "auto", "RLPIPE_STACK_HOME": str(home)}


@contextmanager
def local_stack() -> Iterator[Path]:
    """Start the stack on free ports, yield its home; stop it by its process id at the end."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-bench-stack-") as tmp:
        home = Path(tmp) / "stack"
        cmd = [sys.executable, str(ROOT / "scripts" / "stack.py"), "up", "--home", str(home)]
        cmd += ["--ray", "--prefect-port", str(free_port()), "--mlflow-port", str(free_port())]
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
        env.update(OMP_NUM_THREADS="1", RLPIPE_STACK="off")
        out = Path(tmp) / "stack.out"
        with out.open("w") as log:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while not (home / "stack.json").is_file():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the stack did not start:\n{out.read_text()[-3000:]}")
                time.sleep(0.5)
            print(f"local stack up: {json.loads((home / 'stack.json').read_text())['env']}")
            yield home
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the stack stops its children by PID
                proc.wait(timeout=120)
