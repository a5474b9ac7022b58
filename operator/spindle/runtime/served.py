"""An HTTP server a driver pod runs beside its steps, in a daemon thread: the read-only query
server (`runtime.query_server`) and the readiness server (`runtime.health`) start, tell their
port, answer and stop the same way.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Self


class Served:
    """`http` served in a daemon thread once started; stopped, its socket is closed."""

    def __init__(self, http: HTTPServer) -> None:
        self.http = http
        self.thread = threading.Thread(target=http.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.http.server_address[1])

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self, *, wait: float = 5.0) -> None:
        """Stop serving within `wait` seconds: a request still being answered (a long query)
        is left to its daemon thread, and does not hold the driver's exit."""
        ending = threading.Thread(target=self.http.shutdown, daemon=True)
        ending.start()
        ending.join(wait)
        self.http.server_close()


def reply(handler: BaseHTTPRequestHandler, code: int, data: bytes, content_type: str) -> None:
    """Answer the request `handler` holds: `code`, then `data` as `content_type`."""
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
