"""The driver pod's readiness: whether its driver is stepping, or waiting to retry a step that
storage refused (`runtime.loop`, `spec.retry`).

The kubelet asks `GET /readyz` on the pod IP (`api.types.HEALTH_PORT`, the pod's readiness
probe): 200 while the driver starts and steps, 503 from a failed attempt until a step succeeds
again. A pod that was Ready and is no longer is how the operator sees a retrying driver
(`k8s.pods.observed_driver`) without reading logs or giving the driver any right on the API
server. The first answer is always 200, so the pod is Ready once even when its first step
fails before the kubelet first asked. The answer is one word: nothing of the pipeline's data,
settings or errors (the driver's log has the retry's line).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spindle.api.types import READY_PATH
from spindle.runtime.served import Served, reply


class _DualStack(ThreadingHTTPServer):
    """Every address of the pod, IPv6 and IPv4 (the kubelet probes the pod IP, of either)."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _listening(port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A server on every address of the pod: dual-stack, or IPv4 where the pod has no IPv6."""
    try:
        return _DualStack(("::", port), handler)
    except OSError:
        return ThreadingHTTPServer(("0.0.0.0", port), handler)


class Health(Served):
    """An HTTP server in a daemon thread answering `READY_PATH` from `retrying`."""

    def __init__(self, *, port: int, host: str | None = None) -> None:
        """On `port` of every address of the pod (of `host` only, when given)."""
        self._retrying = False
        self._answered = False
        handler = self._handler()
        http = (
            _listening(port, handler)
            if host is None
            else ThreadingHTTPServer((host, port), handler)
        )
        http.daemon_threads = True
        super().__init__(http)

    def retrying(self, line: str | None) -> None:
        """The driver waits to retry a step (`line`, which the log has), or no longer (None)."""
        self._retrying = line is not None

    def answer(self, path: str) -> tuple[int, str]:
        if path != READY_PATH:
            return 404, f"GET {READY_PATH} is all there is.\n"
        first, self._answered = not self._answered, True
        return (503, "retrying\n") if self._retrying and not first else (200, "stepping\n")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, text = health.answer(self.path)
                reply(self, code, text.encode(), "text/plain; charset=utf-8")

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
