"""The driver pod's readiness: whether its driver is stepping, or waiting to retry a step that
storage refused (`runtime.loop`, `spec.retry`).

The kubelet asks `GET /readyz` on the pod IP (`api.types.HEALTH_PORT`, the pod's readiness
probe): 200 while the driver steps, 503 while it waits to retry, with the retry's line as the
body. A pod that was Ready and is no longer is how the operator sees a retrying driver
(`k8s.pods.observed_driver`) without reading logs or giving the driver any right on the API
server. The answer is one flag: nothing of the pipeline's data or settings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANY_ADDRESS = "0.0.0.0"  # the kubelet probes the pod IP
READY_PATH = "/readyz"


class Health:
    """An HTTP server in a daemon thread answering `READY_PATH` from `retrying`."""

    def __init__(self, *, port: int, host: str = ANY_ADDRESS) -> None:
        self._retrying: str | None = None
        self.http = ThreadingHTTPServer((host, port), self._handler())
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.http.server_address[1])

    def start(self) -> Health:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def retrying(self, line: str | None) -> None:
        """The driver waits to retry a step (`line` says why and when), or no longer (None)."""
        self._retrying = line

    def answer(self, path: str) -> tuple[int, str]:
        if path != READY_PATH:
            return 404, f"GET {READY_PATH} is all there is.\n"
        line = self._retrying
        return (200, "stepping\n") if line is None else (503, f"{line}\n")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, text = health.answer(self.path)
                data = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # the kubelet asks every few seconds: no line per probe

        return Handler


def serve_health(*, port: int | None, say: Callable[[str], None]) -> Health | None:
    """The readiness server, when asked for; a port that cannot be bound costs the readiness
    only (the pod is never Ready, so never seen as retrying)."""
    if port is None:
        return None
    try:
        return Health(port=port).start()
    except OSError as error:
        say(f"Not serving readiness: port {port} cannot be bound ({error}).")
        return None
