"""An iteration run again waits for a restarting Prefect API instead of failing at once."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prefect.settings import PREFECT_API_URL, temporary_settings

from infra.ops.prefect_api import wait_for_configured_api
from infra.processes import free_port


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        pass


def test_it_returns_once_the_api_answers_and_gives_up_after_the_timeout() -> None:
    port = free_port()
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
        start = time.monotonic()
        assert wait_for_configured_api(timeout=1.0) is False  # nothing listens
        assert 1.0 <= time.monotonic() - start < 5.0
        server = ThreadingHTTPServer(("127.0.0.1", port), _Health)
        starter = threading.Timer(1.5, server.serve_forever)  # the API comes back later
        starter.start()
        try:
            start = time.monotonic()
            assert wait_for_configured_api(timeout=30.0) is True
            assert time.monotonic() - start < 10.0
        finally:
            server.shutdown()
            server.server_close()
            starter.cancel()
