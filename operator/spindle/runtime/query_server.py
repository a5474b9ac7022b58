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
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Self

from spindle.errors import SpindleError
from spindle.program import parse_program
from spindle.program.limits import MAX_PROGRAM_BYTES
from spindle.program.queries import MAX_QUERY_ROWS, row_limit
from spindle.runtime.engine import Runtime
from spindle.runtime.served import Served, reply
from spindle.wording import counted

LOOPBACK = "127.0.0.1"


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
            def do_POST(self) -> None:
                code, body = server.respond(self.path, self._body())
                reply(self, code, json.dumps(body, default=str).encode(), "application/json")

            def _body(self) -> bytes | None:
                length = int(self.headers.get("Content-Length") or 0)
                return None if length > MAX_PROGRAM_BYTES else self.rfile.read(length)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # `respond` says one line per query

        return Handler

    def respond(self, path: str, body: bytes | None) -> tuple[int, dict[str, Any]]:
        try:
            if path != "/query":
                raise SpindleError(reason="NotFound", message="POST /query is all there is.")
            if body is None:
                raise SpindleError(
                    reason="QueryTooLarge",
                    message=f"The query is larger than {MAX_PROGRAM_BYTES} bytes.",
                )
            request = json.loads(body)
            sql = request.get("sql")
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
