"""Making sure a Prefect API is there: use ``PREFECT_API_URL`` or start a local server."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from infra.cluster.runtime_env import all_store_access_vars
from infra.ops.prefect_profile import running_profile_api
from infra.processes import die_with_parent, free_port, signal_group

logger = logging.getLogger(__name__)


#: Client settings for a server started here (CSRF protection is off on it): without them
#: every new API client (one per child flow run) first asks the server for a CSRF token.
CLIENT_SETTINGS = {"PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "false"}
#: History a server started here keeps: once an hour it deletes events older than
#: ``PREFECT_SERVER_EVENTS_RETENTION_PERIOD`` (Prefect's default: 7 days) and, with these,
#: finished flow runs (their task runs, logs and artifacts) older than 30 days. A long run
#: adds about 0.2 MB of history per iteration, mostly events. A variable already set in the
#: environment wins.
HISTORY_RETENTION = {
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": '["events", "flow_runs"]',
    "PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": str(30 * 24 * 3600),
}


class LocalPrefectServer:
    """A ``prefect server start`` subprocess on 127.0.0.1 (stopped by :meth:`stop`).

    It runs through :mod:`infra.ops.prefect_server_main`, whose SQLite write transactions
    wait for each other instead of answering 503 (a 2 s client retry), and it logs any
    request that still answers 503 ("Encountered retryable exception") to ``log_path``.

    The server runs in its own session, so a Ctrl-C in the terminal (sent to the whole
    foreground process group) does not stop it while the run finishes its iteration and
    reports its final state; it gets SIGTERM when the process that started it exits, so it
    never outlives it. Create it from the main thread (see
    :func:`~infra.processes.die_with_parent`).

    Args:
        log_path: Where the server's output goes.
        port: Port to bind (default: a free one).
        extra_env: Extra environment for the server (e.g. its own ``PREFECT_HOME``).
    """

    def __init__(
        self, log_path: Path, port: int | None = None, extra_env: dict[str, str] | None = None
    ) -> None:
        self.port = port or free_port()
        self.started = time.monotonic()
        self.url = f"http://127.0.0.1:{self.port}/api"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        cmd = [
            sys.executable,
            "-m",
            "infra.ops.prefect_server_main",  # `prefect` with write transactions that wait
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        env = {
            **HISTORY_RETENTION,
            "PREFECT_API_LOG_RETRYABLE_ERRORS": "true",
            **os.environ,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "true",
            # the UI's pages call this API (by default they would call port 4200's)
            "PREFECT_UI_API_URL": self.url,
            # bound to 127.0.0.1 for this process's run: its clients skip the CSRF-token
            # request that each new client would otherwise make (CLIENT_SETTINGS)
            "PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED": "false",
        }
        env.update(extra_env or {})
        for key in ("PREFECT_API_URL", *all_store_access_vars()):  # it needs no bucket
            env.pop(key, None)
        self.process = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # from the main thread: see the docstring
        )

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until ``/health`` answers.

        Raises:
            RuntimeError: The server exited or did not become healthy in time.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"prefect server exited with code {self.process.returncode}; see {self._log.name}"
                )
            if api_answers(self.url):
                return
            time.sleep(0.25)
        raise RuntimeError(
            f"prefect server did not become healthy in {timeout:.0f}s; see {self._log.name}"
        )

    def stop(self) -> None:
        """Terminate the server and anything it started (its process group)."""
        if self.process.poll() is None:
            signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


#: The last server :func:`start_prefect_api` started in this process.
_started: LocalPrefectServer | None = None


def ensure_prefect_api(state_dir: Path) -> LocalPrefectServer | None:
    """Return None if an API is configured; else start a local server and export its URL.

    The URL is put in ``os.environ`` so Ray workers running Prefect tasks report to the
    same API instead of each starting a temporary server.
    """
    server = start_prefect_api(state_dir)
    if server is not None:
        wait_for_prefect_api(server)
    return server


def start_prefect_api(state_dir: Path) -> LocalPrefectServer | None:
    """Like :func:`ensure_prefect_api`, without waiting for the server to answer.

    An API named by ``PREFECT_API_URL``, or by the active Prefect profile when it answers
    (:mod:`infra.ops.prefect_profile`), is used instead of starting one.

    Other start-up work (Ray) can run while the server starts; call
    :func:`wait_for_prefect_api` before the first Prefect call. The URL is exported at once
    (processes started from here on, such as a local Ray cluster, inherit it). A server
    this process started and has not stopped is returned again rather than a second one.
    """
    global _started
    running = _started is not None and _started.process.poll() is None
    if running and os.environ.get("PREFECT_API_URL") == _started.url:
        return _started  # started earlier in this process (flows.early_start), not yet stopped
    if os.environ.get("PREFECT_API_URL"):
        return None
    profile_url = running_profile_api()
    if profile_url:  # exported: Ray workers report to it too
        os.environ["PREFECT_API_URL"] = profile_url
        logger.info("using the Prefect API of the active profile: %s", profile_url)
        return None
    server = LocalPrefectServer(state_dir / "prefect-server.log")
    os.environ.update({"PREFECT_API_URL": server.url, **CLIENT_SETTINGS})
    _started = server
    return server


def api_answers(api_url: str, timeout: float = 2.0) -> bool:
    """Whether the Prefect API at ``api_url`` (``http://host:port/api``) answers ``/health``."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_until_api_answers(api_url: str, timeout: float) -> bool:
    """Wait (at most ``timeout`` seconds) until the Prefect API at ``api_url`` answers.

    Returns:
        Whether it answered.
    """
    deadline = time.monotonic() + timeout
    warned = False
    while not api_answers(api_url):
        if time.monotonic() > deadline:
            return False
        if not warned:
            logger.warning("the Prefect API at %s does not answer; waiting for it", api_url)
            warned = True
        time.sleep(1.0)
    return True


#: Longest wait for an unreachable Prefect API before an iteration runs again.
API_WAIT_SECONDS = 180.0


def wait_for_configured_api(timeout: float = API_WAIT_SECONDS) -> bool:
    """Wait for the Prefect API of this process's settings to answer (True at once without one).

    A new Prefect client fails at once when the API refuses connections (it retries only
    once it has connected), so an iteration run again while the API restarts would fail
    straight away.
    """
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    return True if not url else wait_until_api_answers(url, timeout)


def wait_for_prefect_api(server: LocalPrefectServer, timeout: float = 60.0) -> None:
    """Block until a server from :func:`start_prefect_api` answers (logs how long it took)."""
    server.wait_healthy(timeout)
    logger.info(
        "started a local Prefect API at %s in %.1fs",
        server.url,
        time.monotonic() - server.started,
    )


def stop_prefect_api(server: LocalPrefectServer) -> None:
    """Stop a server from :func:`start_prefect_api` and unset the variables it exported.

    A later :func:`start_prefect_api` in this process then starts a new server instead of
    pointing at the stopped one.
    """
    server.stop()
    if os.environ.get("PREFECT_API_URL") == server.url:
        os.environ.pop("PREFECT_API_URL")
        for key in CLIENT_SETTINGS:
            os.environ.pop(key, None)


#: Where ``prefect server start`` serves its UI by default (the same database as the
#: temporary server a CLI run starts: ``$PREFECT_HOME``, ``~/.prefect``).
PERSISTENT_UI = "http://127.0.0.1:4200"


def lasting_flow_run_url(flow_run_id: str, ui_url: str | None) -> str:
    """A link to a flow run that still opens after the run ends.

    The temporary API a CLI run starts listens on a random port and stops with the run; its
    runs stay in the Prefect database, which ``prefect server start`` serves on
    :data:`PERSISTENT_UI`. Runs on any other API keep that API's own link.
    """
    temporary = _started is not None and os.environ.get("PREFECT_API_URL") == _started.url
    if temporary and flow_run_id:
        return f"{PERSISTENT_UI}/runs/flow-run/{flow_run_id}"
    return ui_url or ""
