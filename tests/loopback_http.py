"""A scripted HTTP server on a free loopback port, for `with` blocks: what the model stand-ins share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    """Serves `handler` on 127.0.0.1 in a daemon thread between `__enter__` and `__exit__`.

    `closing` is set when the block ends, so a handler told to stall can stop waiting."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self.closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name=name, daemon=True
        )

    @property
    def base_url(self) -> str:
        """OpenAI-style: the server's root plus `/v1`."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the test output stays readable
        pass
