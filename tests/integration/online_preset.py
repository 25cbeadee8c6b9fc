"""A tiny ``online_arith`` (the one-layer test LM behind the endpoint, small batches), and
reading what a served or training process prints while it runs."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import ROOT


def tiny_online_preset(
    root: Path, run: str, batch: int, iterations: int, online: dict[str, Any] | None = None
) -> Path:
    """Write the preset under ``root``; ``online`` updates its ``online`` section.

    Returns:
        The YAML file's path.
    """
    model = create_tiny_lm(root / "tiny", num_hidden_layers=1)
    config = {
        "run": {
            "name": run,
            "max_iterations": iterations,
            "eval_interval": 2,
            "checkpoint_interval": 2,
        },
        "model": {"model_type": "hf_causal_lm", "model_path": str(model)},
        "data": {"prompts_per_batch": batch, "eval_size": 8},
        "rollout": {"max_new_tokens": 4},
        "algorithm": {"adv_type": "outcome", "group_size": 1, "normalize_advantages": False},
        "reward": {"reward_type": "math_verify"},
        "actor": {"micro_batch_size": batch, "lr": 1.0e-2},
        "eval": {"pass_k": 1, "sample_rows": 2},
        "online": {
            "enabled": True,
            "port": 0,
            "batch_size": batch,
            "user": {"enabled": True, "noise": 0.2},
            **(online or {}),
        },
        "tracking": {"registered_model_name": None, "system_metrics": False},
    }
    path = root / "online_tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_process(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, ProcessOutput]:
    """Start ``cmd`` from the repository root in its own session, its output read aside."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return proc, ProcessOutput(proc)


class ProcessOutput:
    """The lines a process prints, read by a thread so it never blocks on a full pipe.

    Args:
        proc: A process started with ``stdout=PIPE`` (text mode).
    """

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: [self._queue.put(x) for x in proc.stdout], daemon=True
        ).start()

    def take(self) -> list[str]:
        """The lines printed since the last call (also kept in :attr:`lines`)."""
        new = []
        while not self._queue.empty():
            new.append(self._queue.get())
        self.lines += new
        return new

    def wait_for(self, pattern: str, timeout: float = 300) -> re.Match[str]:
        """The first new line matching ``pattern`` (fails when the process exits first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.lines.append(self._queue.get(timeout=1))
            except queue.Empty:
                continue
            found = re.search(pattern, self.lines[-1])
            if found:
                return found
        raise AssertionError(f"{pattern!r} not printed:\n{self.text(60)}")

    def text(self, last: int | None = None) -> str:
        """Everything printed so far (the ``last`` lines only), after a moment for the
        reader thread to catch up."""
        time.sleep(0.5)
        self.take()
        return "".join(self.lines[-last:] if last else self.lines)
