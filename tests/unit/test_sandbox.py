"""The subprocess sandbox, for real: limits, outcomes, cleanup, environment and network.

Every case runs a real interpreter with small limits (at most a couple of seconds each);
the runs' directories go to a directory of the test's, so that "no process survives" is
"no process has its working directory there" and "the directory is removed" is "it is empty".
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from infra.sandbox.pump import Pump
from infra.sandbox.subprocess_sandbox import SubprocessSandbox
from rl_core.agents.outcomes import Outcome
from rl_core.agents.sandbox import SANDBOXES, SandboxLimits
from rl_core.llm.implementations import resolve

ROOT = os.geteuid() == 0
#: A wall-clock limit far above the CPU limit: on 2 busy cores 1 s of CPU can take 4 s.
SMALL = SandboxLimits(wall_seconds=15, cpu_seconds=1, memory_bytes=256 << 20)
#: The code leaves a child that escapes its process group (``setsid``), then lingers.
ESCAPE = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(30)\n"
    "    os._exit(0)\n"
    "time.sleep({main_sleep})\n"
)


@pytest.fixture()
def parent_dir() -> Iterator[str]:
    """A directory for the runs' directories (others may traverse it: root drops its uid)."""
    path = tempfile.mkdtemp(prefix="rlpipe-sandbox-test-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def sandbox(parent_dir: str) -> SubprocessSandbox:
    return SubprocessSandbox(temp_dir=parent_dir)


@pytest.fixture(params=[True, False], ids=["namespaces", "no-namespaces"])
def any_sandbox(request: pytest.FixtureRequest, parent_dir: str) -> SubprocessSandbox:
    return SubprocessSandbox(temp_dir=parent_dir, namespaces=request.param)


def survivors(parent_dir: str, wait_s: float = 1.0) -> list[int]:
    """Pids of live processes whose working directory is under ``parent_dir``."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(parent_dir):
                    found.append(int(pid))
            except OSError:  # gone, or a zombie
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_the_registry_resolves_subprocess_to_this_class() -> None:
    assert resolve(SANDBOXES.get("subprocess")) is SubprocessSandbox


def test_a_program_that_prints_is_ok(sandbox: SubprocessSandbox) -> None:
    run = sandbox.run("print(1+1)")
    assert (run.outcome, run.exit_code, run.stdout, run.limit) == (Outcome.OK, 0, "2\n", None)
    assert run.wall_s > 0 and run.cpu_s >= 0


def test_stdin_reaches_the_code(sandbox: SubprocessSandbox) -> None:
    run = sandbox.run("import sys\nprint(sum(map(int, sys.stdin.read().split())))", "1 2 3")
    assert run.outcome is Outcome.OK and run.stdout == "6\n"


def test_an_exception_is_the_models_failure_with_its_traceback(
    sandbox: SubprocessSandbox,
) -> None:
    run = sandbox.run("def f():\n    raise ValueError('boom')\nf()")
    assert run.outcome is Outcome.MODEL_FAILURE and run.exit_code == 1 and run.limit is None
    assert "Traceback" in run.stderr and "ValueError: boom" in run.stderr


def test_the_codes_output_cannot_pass_for_the_launchers_messages(
    sandbox: SubprocessSandbox,
) -> None:
    fake = "started\nexit 0 0 0\nerror nope\n"
    run = sandbox.run(f"import sys\nprint({fake!r})\nsys.stderr.write({fake!r})\nsys.exit(3)")
    assert (run.outcome, run.exit_code, run.detail) == (
        Outcome.MODEL_FAILURE,
        3,
        "exit status 3",
    )


def test_an_endless_loop_is_stopped_by_the_cpu_limit(sandbox: SubprocessSandbox) -> None:
    run = sandbox.run("while True: pass", limits=SMALL)
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "cpu")
    assert run.exit_code is not None and run.exit_code < 0
    assert 0.9 <= run.cpu_s and run.wall_s < SMALL.wall_seconds


def test_a_fork_bomb_is_refused_and_leaves_no_process(
    any_sandbox: SubprocessSandbox, parent_dir: str
) -> None:
    # First make sure the process limit applies at all, then let the bomb go.
    single = any_sandbox.run("import os\nos.fork()", limits=SandboxLimits(processes=0))
    assert (single.outcome, single.limit) == (Outcome.MODEL_FAILURE, "processes"), single

    bomb = "import os\nprint(os.getcwd(), flush=True)\nwhile True:\n    os.fork()\n"
    run = any_sandbox.run(bomb, limits=SandboxLimits(wall_seconds=5, processes=3))
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "processes"), run
    assert run.stdout.startswith(parent_dir)
    assert survivors(parent_dir) == []
    assert os.listdir(parent_dir) == []


@pytest.mark.parametrize("main_sleep", [0.1, 30], ids=["exits", "wall-clock"])
def test_a_setsid_double_fork_does_not_outlive_the_run(
    any_sandbox: SubprocessSandbox, parent_dir: str, main_sleep: float
) -> None:
    limits = SandboxLimits(wall_seconds=10 if main_sleep < 1 else 1, processes=3)
    run = any_sandbox.run(ESCAPE.format(main_sleep=main_sleep), limits=limits)
    if main_sleep < 1:
        assert run.outcome is Outcome.OK, run
    else:
        assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "wall"), run
    assert survivors(parent_dir) == []


def test_a_huge_allocation_is_the_memory_limit(sandbox: SubprocessSandbox) -> None:
    run = sandbox.run("b = bytearray(10 * 1024**3)", limits=SMALL)
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "memory")
    assert "MemoryError" in run.stderr


def test_a_huge_file_is_the_file_size_limit_and_the_directory_goes(
    sandbox: SubprocessSandbox, parent_dir: str
) -> None:
    code = (
        "import os\nprint(os.getcwd(), flush=True)\n"
        "with open('big', 'wb') as f:\n"
        "    for _ in range(1024):\n"
        "        f.write(bytes(1 << 20))\n"
    )
    run = sandbox.run(code, limits=SandboxLimits(wall_seconds=5, file_bytes=1 << 20))
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "file_size"), run
    assert run.stdout.startswith(parent_dir) and not os.path.exists(run.stdout.strip())
    assert os.listdir(parent_dir) == []


def test_a_directory_the_code_closed_is_removed_too(
    sandbox: SubprocessSandbox, parent_dir: str
) -> None:
    code = "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').close()\nos.chmod('a', 0)\n"
    assert sandbox.run(code).outcome is Outcome.OK
    assert os.listdir(parent_dir) == []


def test_sleeping_past_the_wall_clock_is_the_models_failure(sandbox: SubprocessSandbox) -> None:
    run = sandbox.run("import time\ntime.sleep(100)", limits=SandboxLimits(wall_seconds=1))
    # The rule: the wall-clock limit after the code started is the model's.
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "wall")
    assert 0.9 <= run.wall_s < 3 and run.cpu_s < 0.5


def test_a_launcher_that_never_starts_the_code_is_an_infrastructure_failure(
    parent_dir: str,
) -> None:
    hang = os.path.join(parent_dir, "hang.sh")
    with open(hang, "w") as f:
        f.write("#!/bin/sh\nexec sleep 30\n")
    os.chmod(hang, 0o755)
    sandbox = SubprocessSandbox(launcher_python=hang, temp_dir=parent_dir)
    run = sandbox.run("print(1)", limits=SandboxLimits(wall_seconds=0.3))
    # The rule: the wall-clock limit before the code started is the infrastructure's.
    assert (run.outcome, run.limit, run.exit_code) == (Outcome.INFRA_FAILURE, "wall", None)
    assert run.wall_s < 3


@pytest.mark.parametrize("which", ["python", "launcher_python"])
def test_an_interpreter_that_cannot_start_is_an_infrastructure_failure(
    parent_dir: str, which: str
) -> None:
    sandbox = SubprocessSandbox(temp_dir=parent_dir, **{which: "/nonexistent/python"})
    run = sandbox.run("print(1)")
    assert (run.outcome, run.exit_code, run.stdout) == (Outcome.INFRA_FAILURE, None, "")
    assert "/nonexistent/python" in run.detail or "No such file" in run.detail
    assert os.listdir(parent_dir) == []


def test_the_code_gets_an_empty_environment(
    sandbox: SubprocessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLPIPE_SANDBOX_SENTINEL", "secret")
    run = sandbox.run("import os\nprint(sorted(os.environ))\nprint(os.environ['HOME'])")
    names, home = run.stdout.splitlines()
    assert "RLPIPE_SANDBOX_SENTINEL" not in names and "secret" not in run.stdout
    assert set(eval(names)) <= {"PATH", "LANG", "HOME", "TMPDIR", "LC_CTYPE"}
    assert home.startswith(sandbox.temp_dir or "")


def test_an_output_flood_is_cut_and_memory_stays_bounded(sandbox: SubprocessSandbox) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    limits = SandboxLimits(wall_seconds=15, cpu_seconds=1, output_bytes=10_000)
    run = sandbox.run("while True:\n    print('x' * 1000)", limits=limits)
    assert (run.outcome, run.limit) == (Outcome.MODEL_FAILURE, "cpu")
    assert len(run.stdout) == 10_000 and set(run.stdout) == {"x", "\n"}
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB


def _listener() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    return server


CONNECT = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as exc:\n"
    "    print('failed', exc.errno)\n"
)


def test_the_network_is_cut_off_where_namespaces_are_available(
    sandbox: SubprocessSandbox,
) -> None:
    with _listener() as server:
        run = sandbox.run(CONNECT.format(port=server.getsockname()[1]))
        assert run.outcome is Outcome.OK
        assert run.network_isolated == sandbox.network_isolated
        if not run.network_isolated:
            pytest.skip("no network namespace on this machine (the sandbox says so)")
        assert run.stdout.startswith("failed")
        with pytest.raises(TimeoutError):
            server.accept()


def test_without_namespaces_the_sandbox_says_the_network_is_open(parent_dir: str) -> None:
    sandbox = SubprocessSandbox(temp_dir=parent_dir, namespaces=False)
    with _listener() as server:
        run = sandbox.run(CONNECT.format(port=server.getsockname()[1]))
        assert run.outcome is Outcome.OK and not run.network_isolated
        assert run.stdout == "connected\n"
        assert not sandbox.network_isolated


def test_concurrent_runs_get_their_own_output(sandbox: SubprocessSandbox) -> None:
    code = "import sys, os\nprint(sys.stdin.read().upper(), os.getcwd())"
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda i: sandbox.run(code, f"thread{i}"), range(4)))
    assert [run.outcome for run in runs] == [Outcome.OK] * 4
    assert [run.stdout.split()[0] for run in runs] == [f"THREAD{i}" for i in range(4)]
    assert len({run.stdout.split()[1] for run in runs}) == 4  # a directory each


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_an_interrupted_run_kills_everything_and_cleans_up(
    parent_dir: str, monkeypatch: pytest.MonkeyPatch, namespaces: bool
) -> None:
    if not namespaces and not ROOT:
        pytest.skip("without namespaces only root can find a setsid escape (documented)")
    original = Pump.until_exit

    def interrupted(self: Pump, deadline: float) -> bool:
        original(self, time.monotonic() + 0.4)
        raise KeyboardInterrupt

    monkeypatch.setattr(Pump, "until_exit", interrupted)
    sandbox = SubprocessSandbox(temp_dir=parent_dir, namespaces=namespaces)
    with pytest.raises(KeyboardInterrupt):
        sandbox.run(ESCAPE.format(main_sleep=30), limits=SandboxLimits(processes=3))
    assert survivors(parent_dir) == []
    assert os.listdir(parent_dir) == []


OWNER = """\
import sys, threading
from infra.sandbox.subprocess_sandbox import SubprocessSandbox
from rl_core.agents.sandbox import SandboxLimits
sandbox = SubprocessSandbox(temp_dir=sys.argv[1], namespaces=sys.argv[2] == "1")
code = sys.stdin.read()
runs = [
    threading.Thread(
        target=sandbox.run,
        args=(code,),
        kwargs={"limits": SandboxLimits(processes=3)},
        daemon=True,  # as a Ray worker's threads: Ctrl-C ends the process at once
    )
    for _ in range(2)
]
for run in runs:
    run.start()
print("started", flush=True)
for run in runs:
    run.join()
"""


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_worker_killed_mid_run_leaves_no_sandbox_process(
    parent_dir: str, namespaces: bool, how: str
) -> None:
    """The process running sandboxes (a rollout worker) dies, killed or by Ctrl-C, while two
    tool calls run in its threads: every process of theirs goes too, setsid escapes included."""
    if not namespaces and not ROOT:
        pytest.skip("without namespaces only root can find a setsid escape (documented)")
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, parent_dir, "1" if namespaces else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    owner.stdin.write(ESCAPE.format(main_sleep=30))
    owner.stdin.close()
    assert owner.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 20
    while len(survivors(parent_dir, wait_s=0)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # both runs' code and their escaped children are up
    assert len(survivors(parent_dir, wait_s=0)) >= 4
    owner.send_signal(getattr(signal, how))
    owner.wait(timeout=30)
    assert survivors(parent_dir, wait_s=5.0) == []
