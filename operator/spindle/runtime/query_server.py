"""The driver pod's query server: read-only SQL over the pipeline's latest checkpoint, for
`kubectl spindle query`, which reaches it through the API server's port-forward.

It listens on the pod's loopback only (127.0.0.1, `api.types.QUERY_PORT`): no Service, not on
the pod IP, so the API server's authorization of `pods/portforward` is the one way in (see
docs/operator.md, *Queries*). One request at a time, `POST /query` with `{"sql": ...}`:
the query is checked (`program.queries`, the same check the client made) and runs on a
SparkSession of its own (own temporary views and settings) over the Delta versions the latest
committed checkpoint pins. It writes nothing and never touches the step's session, so the
running steps, their intents and checkpoints are as without it. The answer is the columns, the
rows as JSON (`program.queries.plain`) and the checkpoint they come from, or a Feldera error
body.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import select
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Self

from pyspark.sql import SparkSession

from spindle.errors import SpindleError
from spindle.program import parse_program
from spindle.program.limits import MAX_PROGRAM_BYTES
from spindle.program.queries import MAX_QUERY_ROWS, row_limit
from spindle.runtime.engine import Runtime
from spindle.runtime.served import Served, reply
from spindle.wording import counted

LOOPBACK = "127.0.0.1"

REQUEST_SECONDS = 30.0
"""How long the server waits for a request's bytes: it answers one query at a time, and a
connection left open without one (a port-forward's) held every later query, and the pod's
stop."""


def answer(runtime: Runtime, sql: str, *, limit: int = MAX_QUERY_ROWS) -> dict[str, Any]:
    """The first `limit` rows of `sql` over the latest committed checkpoint, whether it has
    more (`truncated`), and that checkpoint's id."""
    manifest = runtime.store.latest()
    if manifest is None:
        raise SpindleError(
            reason="CheckpointNotFound",
            message="The pipeline has no checkpoint yet; query it once its first step committed.",
        )
    found = runtime.query(parse_program(manifest.program.text), manifest, sql, limit=limit)
    return {
        "checkpoint": manifest.id,
        "columns": list(found.columns),
        "rows": list(found.rows),
        "truncated": found.truncated,
    }


class Abandonment:
    """While a query is answered, watches its connection: once the client has closed it (its
    `--timeout` passed), the query's Spark jobs are cancelled. The server answers one query at
    a time, and an abandoned one held every later query, and the steps' share of the driver,
    until it ended by itself."""

    _groups = itertools.count()

    def __init__(self, connection: socket.socket, spark: SparkSession) -> None:
        self.connection, self.spark = connection, spark
        self.group = f"spindle-query-{next(self._groups)}"
        self.gone = False
        self._done = threading.Event()
        self._wake, self._woken = socket.socketpair()  # ends the watcher's wait at once
        self._watcher = threading.Thread(target=self._watch, name="query-client", daemon=True)

    def __enter__(self) -> Self:
        self._watcher.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._wake.send(b"!")  # the answer waited up to WATCH_SECONDS for the watcher
        self._watcher.join()
        self._wake.close()
        self._woken.close()

    def _closed(self) -> bool:
        """Whether the client closed its end (nothing more to read, ever). A client that only
        shuts its sending side (`nc -N`) reads as gone too: `kubectl spindle query` never
        does."""
        watched = [self.connection, self._woken]
        readable, _, _ = select.select(watched, [], [], WATCH_SECONDS)
        if self.connection not in readable:
            return False
        try:
            more = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:  # reset
            return True
        if more:  # bytes past the request: not a close, and not looked at again at once
            self._done.wait(WATCH_SECONDS)
        return not more

    def _watch(self) -> None:
        while not self._done.is_set():
            if not self.gone and self._closed():
                self.gone = True
            if self.gone:
                self.spark.sparkContext.cancelJobGroup(self.group)
                self._done.wait(WATCH_SECONDS)


WATCH_SECONDS = 0.5
"""How often a query's connection is looked at, and its jobs cancelled once it is closed."""


class QueryServer(Served):
    """An HTTP server on 127.0.0.1 in a daemon thread, answering with `answer`."""

    def __init__(self, runtime: Runtime, *, port: int, say: Callable[[str], None]) -> None:
        # a session of its own: the step's temporary views and settings stay the step's
        self.runtime = dataclasses.replace(runtime, spark=runtime.spark.newSession())
        self.say = say
        super().__init__(HTTPServer((LOOPBACK, port), self._handler()))

    def start(self) -> Self:
        super().start()
        self.say(f"Serving read-only queries on {LOOPBACK}:{self.port} (kubectl spindle query).")
        return self

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_SECONDS  # a connection that sends nothing holds no one up

            def do_POST(self) -> None:
                body = self._body()
                with Abandonment(self.connection, server.runtime.spark) as left:
                    code, answered = server.respond(self.path, body, group=left.group)
                if left.gone:
                    server.say(f"query cancelled (job group {left.group}): the client had gone")
                    return
                data = json.dumps(answered, default=str).encode()
                try:
                    reply(self, code, data, "application/json")
                except OSError:  # the client left (its --timeout): nothing to answer
                    server.say("query answer not sent: the client had gone")

            def _body(self) -> bytes | int | None:
                """The request's body; None when too large, a negative number when its
                length is not a length."""
                said = self.headers.get("Content-Length") or "0"
                length = int(said) if said.isdigit() else -1
                if length < 0 or length > MAX_PROGRAM_BYTES:
                    return None if length > 0 else -1
                return self.rfile.read(length)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # `respond` says one line per query

        return Handler

    def respond(
        self, path: str, body: bytes | int | None, *, group: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The answer to one request; its Spark jobs run in job `group`, if given."""
        context = self.runtime.spark.sparkContext
        if group is not None:
            context.setJobGroup(group, "spindle query", interruptOnCancel=True)
        try:
            return self._respond(path, body)
        finally:
            if group is not None:
                context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _respond(self, path: str, body: bytes | int | None) -> tuple[int, dict[str, Any]]:
        try:
            if path != "/query":
                raise SpindleError(reason="NotFound", message="POST /query is all there is.")
            if body is None:
                raise SpindleError(
                    reason="QueryTooLarge",
                    message=f"The query is larger than {MAX_PROGRAM_BYTES} bytes.",
                )
            if isinstance(body, int):
                raise SpindleError(
                    reason="InvalidQuery", message="Content-Length is not a length in bytes."
                )
            request = json.loads(body)
            sql = request.get("sql") if isinstance(request, dict) else None
            if not isinstance(sql, str):
                raise SpindleError(reason="InvalidQuery", message='Send {"sql": "SELECT ..."}.')
            limit = row_limit(request.get("limit", MAX_QUERY_ROWS))
            result = answer(self.runtime, sql, limit=limit)
        except SpindleError as error:
            self.say(f"query refused: {error.reason}")
            return 400, error.body()
        except ValueError as error:
            return 400, SpindleError(reason="InvalidQuery", message=str(error)).body()
        except Exception as error:  # storage or Spark trouble: the driver's steps go on
            self.say(f"query failed: {error!r}")
            failed = SpindleError(
                reason="QueryFailed",
                message=f"The driver could not answer ({type(error).__name__}). See the "
                "driver pod's log; the pipeline itself is not affected.",
            )
            return 500, failed.body()
        more = " (cut: it has more)" if result["truncated"] else ""
        self.say(
            f"query answered: {counted(len(result['rows']), 'row')}{more} at checkpoint "
            f"{result['checkpoint']}"
        )
        return 200, result
