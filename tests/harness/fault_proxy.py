"""A small fault-injecting HTTP proxy on loopback, in front of the real S3 server.

Each request takes the next fault from a plan: `ok` (forward), `503` (answer Service
Unavailable without forwarding), `slow:<seconds>` (wait, then forward) or `drop` (close the
connection without an answer). When the plan runs out, the default fault applies. It listens on
loopback, or on `host` (the host's end of the test node's link, for the operator pod).
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        default: str = "ok",
        strip_conditions: bool = False,
        credentials: tuple[str, str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.upstream = urlparse(upstream)
        self.plan: deque[str] = deque()
        self.default = default
        self.seen: list[str] = []
        self.strip_conditions = strip_conditions
        """Drop If-Match / If-None-Match, as a store without conditional writes would; the
        request is then signed again with `credentials` (access key, secret, region)."""
        self.credentials = credentials
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy.next_fault(f"{self.command} {self.path}")
                if fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "503":
                    payload = b"<Error><Code>ServiceUnavailable</Code></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault.startswith("slow:"):
                    time.sleep(float(fault.split(":", 1)[1]))
                connection = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=30
                )
                headers = {k: v for k, v in self.headers.items()}
                if proxy.strip_conditions:
                    headers = proxy.resign(self.command, self.path, body, headers)
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                connection.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def resign(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> dict[str, str]:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        assert self.credentials is not None, "stripping conditions needs credentials to re-sign"
        access, secret, region = self.credentials
        dropped = {"if-match", "if-none-match", "authorization", "x-amz-date"}
        kept = {k: v for k, v in headers.items() if k.lower() not in dropped}
        request = AWSRequest(
            method=method, url=f"http://{headers.get('Host')}{path}", data=body, headers=kept
        )
        S3SigV4Auth(Credentials(access, secret), "s3", region).add_auth(request)
        return dict(request.headers.items())

    def next_fault(self, request: str) -> str:
        with self._lock:
            fault = self.plan.popleft() if self.plan else self.default
            self.seen.append(f"{fault} {request}")
            return fault

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
