"""Process helpers: liveness (zombies count as gone), ports, sessions, safe kills, fate
sharing."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from infra.processes import (
    free_port,
    kill_process,
    pid_alive,
    port_free,
    port_listening,
    process_start_time,
    session_pids,
    wait_gone,
)

ROOT = Path(__file__).resolve().parents[2]


def test_an_exited_but_unreaped_child_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while pid_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child.pid)  # a zombie until wait(): still reported gone
    assert child.wait() == 0


def test_a_running_process_is_alive_and_leads_its_own_session() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        assert pid_alive(child.pid)
        assert session_pids(child.pid) == [child.pid]
    finally:
        child.kill()
        child.wait()


def test_ports_report_bound_and_listening() -> None:
    port = free_port()
    assert port_free(port) and not port_listening(port)
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert not port_free(port) and port_listening(port)


def test_a_server_in_its_own_session_dies_with_the_process_that_started_it() -> None:
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from infra.processes import die_with_parent\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
            "    start_new_session=True, preexec_fn=die_with_parent())\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(starter.stdout.readline())
    try:
        assert pid_alive(child) and os.getpgid(child) == child != os.getpgid(starter.pid)
        starter.send_signal(signal.SIGKILL)  # no chance to clean up: the kernel does it
        starter.wait()
        deadline = time.monotonic() + 20
        while pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(child)
    finally:
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_kill_process_signals_only_the_process_that_started_then() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start_time(child.pid)
        assert started is not None
        assert started == process_start_time(child.pid)
        assert not kill_process(child.pid, started - 1)  # a reused pid: left alone
        assert not kill_process(child.pid, None)
        assert pid_alive(child.pid)
        assert kill_process(child.pid, started)
        assert child.wait(timeout=10) == -signal.SIGKILL
        assert wait_gone(child.pid, timeout=1.0)
        assert not kill_process(child.pid, started)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_wait_gone_times_out_on_a_running_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = time.monotonic()
        assert not wait_gone(child.pid, timeout=0.3)
        assert 0.3 <= time.monotonic() - start < 2.0
    finally:
        child.kill()
        child.wait()
