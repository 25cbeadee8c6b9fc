"""Fixtures of the unit tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        ok = self.path == "/api/health"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b"true" if ok else b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def health_api() -> Iterator[str]:
    """The URL of a stand-in Prefect API on 127.0.0.1 that answers only ``/api/health``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer tiny byte-level causal LM directory (the VLA tests' backbone)."""
    from rl_core.models.tiny_lm import create_tiny_lm  # transformers: only where used

    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)
