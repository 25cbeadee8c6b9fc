"""An S3-compatible server for tests: ``moto_server`` on 127.0.0.1, stopped by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from infra.processes import executable, free_port

#: Environment that points boto3 and MLflow at the server (dummy credentials).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class MotoServer:
    """``moto_server -H 127.0.0.1 -p PORT`` as a subprocess.

    Args:
        log_path: File receiving the server's output.
    """

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [executable("moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def env(self) -> dict[str, str]:
        """Variables pointing boto3 and MLflow at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.url, "MLFLOW_S3_ENDPOINT_URL": self.url}

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until the server answers HTTP (raises if it exits or times out)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # it answered
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"moto_server not ready on {self.url} within {timeout}s")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) by its PID."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()
