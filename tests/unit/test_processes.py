"""Process helpers: liveness (zombies count as gone), ports, sessions."""

import socket
import subprocess
import sys
import time

from infra.processes import free_port, pid_alive, port_free, port_listening, session_pids


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
