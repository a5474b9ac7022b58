"""`kubectl spindle` against an API server that refuses it, or is not there: a reason and what
to do, never a traceback (a 403 is what the chart's `approval.restrictToGroup` policy answers
an approval with). The API server here is a small HTTP server on loopback."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spindle.cli.kubectl_plugin import main

PIPELINE = {
    "apiVersion": "spindle.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "grades", "namespace": "default", "generation": 2},
    "spec": {"sql": "create table t (id int);"},
    "status": {
        "phase": "AwaitingApproval",
        "observedGeneration": 2,
        "pendingChange": {"id": "b77cf0f27757", "changes": {}, "diff": {}},
    },
}


REFUSED = {
    "refused": (
        "Failed",
        "TableNotMaterialized",
        "Views that need bootstrapping read tables that are not materialized (t), so their "
        "contents are not stored. Declare them with 'materialized' = 'true'.",
    ),
    "rejected": (
        "Stopped",
        "BootstrapRejected",
        "The program changed (change b77cf0f27757) and bootstrapPolicy is reject; the "
        "checkpoint is untouched. Revert the change or set bootstrapPolicy to await_approval "
        "or allow.",
    ),
}
"""Pipelines whose status shows a pending change that cannot run: phase, reason, message."""
PATCHED: list[str] = []
"""The paths the server was asked to patch."""


def _refused(name: str) -> dict[str, Any]:
    phase, reason, message = REFUSED[name]
    condition = {"type": "Ready", "status": "False", "reason": reason, "message": message}
    status = {**PIPELINE["status"], "phase": phase, "conditions": [condition]}
    return {**PIPELINE, "metadata": {**PIPELINE["metadata"], "name": name}, "status": status}


UNDERWAY = {
    **PIPELINE,
    "metadata": {
        **PIPELINE["metadata"],
        "name": "underway",
        "annotations": {"spindle.dev/approve": "b77cf0f27757\n"},
    },
    "status": {
        **PIPELINE["status"],
        "phase": "Bootstrapping",
        "conditions": [{"type": "Ready", "status": "False", "reason": "Bootstrapping"}],
    },
}
"""A pipeline bootstrapping the change its annotation approved."""


def _forbidden(what: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f"{what}: only data-approvers may change spindle.dev/approve",
        "reason": "Forbidden",
        "code": 403,
    }


class _Server(http.server.BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.endswith("/pipelines/hidden"):
            self._send(403, _forbidden("get denied"))
        elif self.path.endswith("/pipelines/expired"):
            self._send(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
        elif self.path.endswith("/pipelines/broken"):
            self._send(500, {"kind": "Status", "message": "etcdserver: timeout", "code": 500})
        elif self.path.endswith("/pipelines/underway"):
            self._send(200, UNDERWAY)
        elif self.path.rsplit("/", 1)[-1] in REFUSED:
            self._send(200, _refused(self.path.rsplit("/", 1)[-1]))
        else:
            self._send(200, PIPELINE)

    def do_PATCH(self) -> None:
        PATCHED.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(403, _forbidden("admission webhook denied"))


def _kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield _kubeconfig(tmp_path / "config", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("args", "reason", "said"),
    [
        (["approve", "grades", "--yes"], "ApiRequestForbidden", "admission webhook denied"),
        (["status", "hidden"], "ApiRequestForbidden", "get denied"),
        (["status", "broken"], "ApiRequestRefused", "etcdserver: timeout"),
    ],
)
def test_a_refusal_of_the_api_server_is_a_reason_not_a_traceback(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], args: list[str], reason: str, said: str
) -> None:
    assert main([*args, "--kubeconfig", str(kubeconfig)]) == 1
    printed = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert f"error {reason}: The API server refused `kubectl spindle {args[0]}`" in printed
    assert said in printed and "Traceback" not in printed


def test_an_api_server_that_is_not_there_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: nothing listens there
    config = _kubeconfig(tmp_path / "config", port)
    assert main(["status", "grades", "--kubeconfig", str(config), "--json"]) == 1
    error = json.loads(capsys.readouterr().out)
    assert error["error_code"] == "ApiServerUnreachable"
    assert "Check that the cluster is up" in error["message"]


def test_credentials_the_api_server_does_not_accept_say_to_log_in_again(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "expired", "--kubeconfig", str(kubeconfig)]) == 1
    printed = " ".join(capsys.readouterr().err.split())
    assert "error ApiRequestUnauthorized:" in printed and "Log in again" in printed


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_change_that_cannot_run_is_not_approved(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`approve --yes` annotated spindle.dev/approve and said "approved" of a change refused
    at planning (Failed) or by bootstrapPolicy reject (Stopped): the status shows it for
    review, but no approval runs it. Exit 1, nothing patched, the phase, reason and what to do."""
    PATCHED.clear()
    assert main(["approve", name, "--yes", "--kubeconfig", str(kubeconfig)]) == 1
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    phase, reason, message = REFUSED[name]
    assert err == (
        f"error NothingToApprove: Pipeline {name} has no change awaiting approval: its phase "
        f"is {phase} ({reason}), and change b77cf0f27757 will not run, so an approval would "
        f"not start it. {message} Nothing was approved; `kubectl spindle diff {name}` shows "
        "the change."
    )
    assert "approved" not in captured.out and PATCHED == []
    assert main(["preview", name, "--kubeconfig", str(kubeconfig)]) == 1  # not waited out
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error NothingToApprove: ") and "Nothing was previewed;" in err
    assert PATCHED == []
    assert main(["diff", name, "--kubeconfig", str(kubeconfig)]) == 0  # still shown
    assert "Change b77cf0f27757" in capsys.readouterr().out


def test_approving_a_change_again_is_no_error(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that approves twice (a retried CI job) while the change bootstraps is told it is
    approved already, exit 0, and nothing is patched."""
    PATCHED.clear()
    assert main(["approve", "underway", "--yes", "--kubeconfig", str(kubeconfig)]) == 0
    assert capsys.readouterr().out == (
        "Change b77cf0f27757 of pipeline underway is approved already (phase Bootstrapping); "
        "nothing to do.\n"
    )
    assert PATCHED == []
