"""`kubectl spindle query`: ask a Running pipeline's driver pod, through the API server's
port-forward, for the rows of one read-only query.

The driver's query server (`runtime.query_server`) listens on the pod's loopback only, so the
user's own RBAC (`pods/portforward` in the pipeline's namespace) is what lets the query in.
The query is checked here (`QueryNotReadOnly`) before anything is sent, and again in the pod.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from spindle.api.types import QUERY_PORT
from spindle.errors import SpindleError

T = TypeVar("T")

SERVING_PHASES = ("Running", "Paused")
"""Phases in which the pipeline's driver runs (Paused: ingestion paused) and answers."""


def driver_of(pipeline: dict[str, Any]) -> str:
    """The name of the driver pod that serves the pipeline's queries, or `PipelineNotRunning`."""
    name = pipeline["metadata"]["name"]
    status = pipeline.get("status") or {}
    phase = status.get("phase") or "Pending"
    driver = (status.get("driverPod") or {}).get("name")
    if phase not in SERVING_PHASES or not driver:
        raise SpindleError(
            reason="PipelineNotRunning",
            message=f"Pipeline {name} is {phase}, not Running: queries are answered by its "
            "running driver. See `kubectl spindle status "
            f"{name}` for why, and query it once it is Running.",
            details={"phase": phase},
        )
    return str(driver)


def exchange(sock: Any, sql: str, *, timeout: float, limit: int) -> dict[str, Any]:
    """POST the query on a connected socket; the server's answer, or its error raised."""
    connection = http.client.HTTPConnection("localhost", QUERY_PORT, timeout=timeout)
    sock.settimeout(timeout)
    connection.sock = sock
    try:
        data = json.dumps({"sql": sql, "limit": limit}).encode()
        connection.request("POST", "/query", data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        body: dict[str, Any] = json.loads(response.read() or b"{}")
    except TimeoutError:
        raise SpindleError(
            reason="QueryTimedOut",
            message=f"The driver did not answer within {timeout:g} s, and cancels the query "
            "now: narrow it (WHERE, LIMIT), or give it longer with --timeout.",
        ) from None
    finally:
        connection.close()
    if response.status != 200:
        raise SpindleError(
            reason=str(body.get("error_code") or "QueryFailed"),
            message=str(body.get("message") or f"The driver answered {response.status}."),
            details=body.get("details") or {},
        )
    return body


def _unreachable(pod: str, namespace: str, why: str) -> SpindleError:
    return SpindleError(
        reason="QueryServerUnreachable",
        message=f"The driver pod {pod} (namespace {namespace}) did not answer on its query port "
        f"{QUERY_PORT}: {why}. A driver that is starting answers once its Spark session is up; "
        "try again in a few seconds, or see `kubectl logs` of the pod.",
        details={"pod": pod},
    )


def _within(timeout: float, call: Callable[[], T]) -> T:
    """`call()`'s result, or TimeoutError after `timeout` seconds. The WebSocket handshake of
    a port-forward has no timeout of its own: a node that never answers held the command."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the caller
            outcome.append((False, error))
        done.set()

    threading.Thread(target=run, name="port-forward", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return cast(T, value)


def forward_query(
    api: Any, *, namespace: str, pod: str, sql: str, timeout: float, limit: int
) -> dict[str, Any]:
    """The query's answer from `pod`, through a port-forward the API server authorizes."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import portforward

    core = client.CoreV1Api(api)
    try:
        forward = _within(
            timeout,
            lambda: portforward(
                core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(QUERY_PORT)
            ),
        )
    except TimeoutError:
        raise _unreachable(
            pod, namespace, f"the port-forward was not set up within {timeout:g} s"
        ) from None
    except ApiException as error:  # a refused WebSocket handshake: status 0, the HTTP one said
        if error.status == 403 or " 403 " in f" {error.reason} ":
            raise SpindleError(
                reason="PortForwardForbidden",
                message=f"You may not port-forward to pods in namespace {namespace}: "
                "querying needs `get` and `create` on `pods/portforward` there (the chart's "
                "viewer role grants them, see docs/operator.md).",
            ) from None
        raise _unreachable(pod, namespace, f"the port-forward failed ({error.reason})") from None
    try:
        return exchange(forward.socket(QUERY_PORT), sql, timeout=timeout, limit=limit)
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise _unreachable(pod, namespace, forward.error(QUERY_PORT) or repr(error)) from None
    finally:
        with contextlib.suppress(OSError):
            forward.close()
