"""`kubectl spindle approve|diff|preview|restart|status|query NAME`: the kubectl plugin.

It is the console script kubectl-spindle.

`approve` reads the pending change id from the status, shows the diff, the estimate (what the
bootstrap evaluates, reads and replaces, and how long it should take) and the data-diff
preview's counts when there is one (`status.pendingChange.preview`), and asks before it
annotates `spindle.dev/approve=<id>` (`--yes` skips the question), only while the phase is
`AwaitingApproval` (a change refused, or stopped by `bootstrapPolicy: reject`, stays in the status
for review, but no approval runs it). It only ever approves the id it showed: if the pending
change moves in between, the operator ignores the approval.
`preview` annotates `spindle.dev/preview=<id>@<time>`, waits for the operator's preview pod to
report (the `Previewed` condition naming that request) and prints the counts as tables.
`restart` starts a failed driver again from the last checkpoint: it adds one to
`spec.restartNonce`, guarded by the object's resourceVersion.
`query` asks a Running pipeline's driver through port-forward (`cli.cluster_query`).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Sequence
from typing import Any

from spindle.api import Phase
from spindle.api.types import APPROVE_ANNOTATION, PREVIEW_ANNOTATION, request_annotation
from spindle.cli import cluster_query, render
from spindle.cli.main import own_usage, parsed, reader_gone
from spindle.errors import SpindleError


def _api(args: argparse.Namespace) -> Any:
    from kubernetes import config

    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=args.kubeconfig, context=args.context
        )
    except Exception as error:
        raise SpindleError(
            reason="KubeconfigUnusable",
            message=f"Cannot load the kubeconfig: {error}. Set KUBECONFIG or --kubeconfig.",
        ) from None


def _custom(args: argparse.Namespace) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(_api(args))


def _namespace(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    from kubernetes import config

    try:
        _, current = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=args.kubeconfig
        )
        return str(current["context"].get("namespace") or "default")
    except Exception:
        return "default"


def _pipeline(args: argparse.Namespace) -> dict[str, Any]:
    from kubernetes.client.exceptions import ApiException

    try:
        body: dict[str, Any] = _custom(args).get_namespaced_custom_object(
            "spindle.dev", "v1alpha1", _namespace(args), "pipelines", args.name
        )
        return body
    except ApiException as error:
        if error.status == 404:
            raise SpindleError(
                reason="PipelineNotFound",
                message=f"No pipeline {args.name!r} in namespace {_namespace(args)}.",
            ) from None
        raise


def _pending(pipeline: dict[str, Any]) -> dict[str, Any]:
    status = pipeline.get("status") or {}
    pending = status.get("pendingChange")
    if not pending:
        raise SpindleError(
            reason="NothingToApprove",
            message=f"Pipeline {pipeline['metadata']['name']} has no pending change (phase "
            f"{status.get('phase', 'unknown')}).",
        )
    return dict(pending)


def _standing(status: dict[str, Any]) -> tuple[str, str, str]:
    """The status's phase, its Ready condition's reason (the phase when it has none) and
    message."""
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    phase = str(status.get("phase") or "unknown")
    return phase, str(ready.get("reason") or phase), str(ready.get("message") or "")


def _awaiting(pipeline: dict[str, Any], *, nothing: str = "Nothing was approved") -> dict[str, Any]:
    """The pending change, when an approval can start it: only while the phase is
    `AwaitingApproval`. A change the plan refuses (`Failed`) or `bootstrapPolicy: reject`
    stops (`Stopped`) stays in the status for review, but no approval runs it."""
    pending = _pending(pipeline)
    phase, reason, said = _standing(pipeline.get("status") or {})
    if phase == Phase.AWAITING_APPROVAL:
        return pending
    name = pipeline["metadata"]["name"]
    raise SpindleError(
        reason="NothingToApprove",
        message=render.not_awaiting_approval(
            name,
            change=pending["id"],
            phase=phase,
            reason=reason,
            said=said,
            shown_by=f"`kubectl spindle diff {name}`",
            nothing=nothing,
        ),
        details={"phase": phase, "reason": reason, "pending": pending["id"]},
    )


def _omitted(pending: dict[str, Any], *, preview: bool = False) -> str | None:
    """What the status left out of the change's lists (`status.pendingChange.omitted`: a large
    program's status keeps 100 of each, a status too large even so keeps none), and where the
    whole is; of the preview's views alone for `preview`."""
    from spindle.lifecycle.status import omitted_note

    note = omitted_note(pending, prefix="preview." if preview else "")
    if note is None:
        return None
    where = [note] if preview else [note, "`spindle plan -f pipeline.yaml` shows the whole change."]
    if any(name.startswith("preview.") for name in pending.get("omitted") or {}):
        where.append(
            f"The whole preview report is previews/{pending['id']}.json under the pipeline's "
            "storage root (<storage uri>/<namespace>/<name>)."
        )
    return " ".join(where)


def _show(pending: dict[str, Any]) -> None:
    out = render.console()
    out.print(render.change_table(pending["id"], pending.get("changes") or {}, pending["diff"]))
    if pending.get("reason"):
        out.print(f"Reason: {pending['reason']}", markup=False)
    render.print_estimate(pending.get("estimate"), out, omitted=pending.get("omitted"))
    render.print_preview(pending.get("preview"), change_id=pending["id"], out=out)
    bootstrap = pending.get("bootstrap") or {}
    if bootstrap.get("allowed") is False:
        out.print(f"[red]Bootstrap refused: {bootstrap.get('error_code')}[/]")
    note = _omitted(pending)
    if note is not None:
        out.print(note, markup=False)


def cmd_diff(args: argparse.Namespace) -> int:
    pending = _pending(_pipeline(args))
    if args.json:
        render.print_json(pending["diff"])
        note = _omitted(pending)  # the diff stays Feldera's shape: the note goes to stderr
        if note is not None:
            render.console(stderr=True).print(note, markup=False)
    else:
        _show(pending)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    pipeline = _pipeline(args)
    status = pipeline.get("status") or {}
    if args.json:
        render.print_json(status)
        return 0
    out = render.console()
    out.print(f"Pipeline [bold]{args.name}[/]: phase [bold]{status.get('phase', 'unknown')}[/]")
    for condition in status.get("conditions") or []:
        out.print(f"  {condition['reason']}: {condition['message']}", markup=False)
    if status.get("pendingChange"):
        out.print(f"  pending change: {status['pendingChange']['id']}")
    if status.get("lastCheckpoint"):
        checkpoint = status["lastCheckpoint"]
        out.print(
            f"  last checkpoint: {checkpoint['id']} ({checkpoint.get('tableRows', 0)} table rows)"
        )
    if status.get("driverPod"):
        driver = status["driverPod"]
        out.print(f"  driver pod: {driver['name']} ({driver['mode']}, {driver['phase']})")
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    pipeline = _pipeline(args)
    status = pipeline.get("status") or {}
    approved = request_annotation(pipeline["metadata"].get("annotations"), APPROVE_ANNOTATION)
    pending_id = (status.get("pendingChange") or {}).get("id")
    phase, reason, _ = _standing(status)
    if pending_id and approved == pending_id and render.underway(phase=phase, reason=reason):
        # approving again (a script run twice) is no error
        print(render.approved_already(args.name, change=pending_id, phase=phase))
        return 0
    pending = _awaiting(pipeline)
    change = pending["id"]
    _show(pending)
    if not args.yes:
        answer = input(f"Approve change {change} of pipeline {args.name}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Not approved.")
            return 1
    _annotate(args, APPROVE_ANNOTATION, change)
    print(f"pipeline/{args.name} approved: {APPROVE_ANNOTATION}={change}")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    from kubernetes.client.exceptions import ApiException

    from spindle.k8s.cluster import api_message

    pipeline = _pipeline(args)
    status, meta = pipeline.get("status") or {}, pipeline["metadata"]
    driver = status.get("driverPod") or {}
    observed = status.get("observedGeneration") == meta.get("generation")
    if status.get("phase") != "Failed" or driver.get("phase") != "Failed" or not observed:
        raise SpindleError(
            reason="NothingToRestart",
            message=f"Pipeline {args.name} has no failed driver to start again (phase "
            f"{status.get('phase', 'unknown')}"
            + ("" if observed else ", and the operator has not seen its latest spec yet")
            + "): restart is for a driver of the current spec that failed.",
        )
    current = (pipeline.get("spec") or {}).get("restartNonce")
    if current is not None and (not isinstance(current, int) or isinstance(current, bool)):
        raise SpindleError(
            reason="InvalidSpec",
            message=f"spec.restartNonce of {args.name} is {current!r}, not a whole number.",
        )
    nonce = (current or 0) + 1
    patch = {
        "metadata": {"resourceVersion": meta["resourceVersion"]},
        "spec": {"restartNonce": nonce},
    }
    try:
        patched = _custom(args).patch_namespaced_custom_object(
            "spindle.dev", "v1alpha1", _namespace(args), "pipelines", args.name, patch
        )
    except ApiException as error:
        if error.status == 409:
            raise SpindleError(
                reason="PipelineChanged",
                message=f"Pipeline {args.name} changed while it was read; run restart again.",
            ) from None
        raise SpindleError(
            reason="RestartRefused",
            message=f"The API server refused the change of spec.restartNonce: "
            f"{api_message(error)}.",
        ) from None
    if (patched.get("spec") or {}).get("restartNonce") != nonce:
        raise SpindleError(
            reason="CrdOutdated",
            message="The API server dropped spec.restartNonce: the Pipeline CRD it serves "
            "predates it (helm does not upgrade CRDs). Update it with `kubectl apply "
            "--server-side --force-conflicts -f charts/spindle/crds/pipeline.yaml`, then run "
            "restart again.",
        )
    print(f"pipeline/{args.name} restarting from its last checkpoint: spec.restartNonce={nonce}")
    return 0


def _annotate(args: argparse.Namespace, key: str, value: str) -> None:
    _custom(args).patch_namespaced_custom_object(
        "spindle.dev",
        "v1alpha1",
        _namespace(args),
        "pipelines",
        args.name,
        {"metadata": {"annotations": {key: value}}},
    )


def served(status: dict[str, Any], request: str) -> dict[str, Any] | None:
    """The `Previewed` condition that answers `request`, once it is no longer in progress."""
    suffix = f"({PREVIEW_ANNOTATION}={request})"
    for condition in status.get("conditions") or []:
        done = condition.get("status") in ("True", "False")
        if condition.get("type") == "Previewed" and done and condition["message"].endswith(suffix):
            return dict(condition)
    return None


def cmd_preview(args: argparse.Namespace) -> int:
    # the operator previews only a change awaiting approval: a request would wait it out
    pending = _awaiting(_pipeline(args), nothing="Nothing was previewed")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    request = f"{pending['id']}@{stamp}"
    _annotate(args, PREVIEW_ANNOTATION, request)
    render.console(stderr=True).print(
        f"pipeline/{args.name} annotated {PREVIEW_ANNOTATION}={request}; waiting for the "
        "preview pod...",
        markup=False,
    )
    deadline = time.monotonic() + args.timeout
    while True:
        status = _pipeline(args).get("status") or {}
        condition = served(status, request)
        if condition is not None:
            break
        if time.monotonic() > deadline:
            raise SpindleError(
                reason="PreviewNotReported",
                message=f"No preview of change {pending['id']} was reported within "
                f"{args.timeout:.0f}s. See `kubectl spindle status {args.name}` and the "
                "preview pod's logs, or wait longer with --timeout.",
            )
        time.sleep(2.0)
    if condition["status"] == "False":
        raise SpindleError(reason=condition["reason"], message=condition["message"])
    preview = (status.get("pendingChange") or {}).get("preview") or {}
    if args.json:
        render.print_json(preview)
    else:
        out = render.console()
        out.print(condition["message"], markup=False)
        render.print_preview(preview, change_id=pending["id"], out=out)
    note = _omitted(status.get("pendingChange") or pending, preview=True)
    if note is not None:  # after the counts; with --json, on stderr
        render.console(stderr=args.json).print(note, markup=False)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from spindle.program.queries import check_query, row_limit

    check_query(args.sql)  # QueryNotReadOnly before anything is sent
    row_limit(args.limit)
    pod = cluster_query.driver_of(_pipeline(args))
    answer = cluster_query.forward_query(
        _api(args),
        namespace=_namespace(args),
        pod=pod,
        sql=args.sql,
        timeout=args.timeout,
        limit=args.limit,
    )
    rows = answer["rows"]  # a driver older than --limit answers with every row
    cut = bool(answer.get("truncated")) or len(rows) > args.limit
    columns = answer.get("columns")  # an older driver answers without them
    render.print_rows(rows[: args.limit], columns=columns, as_json=args.json, truncated=cut)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl spindle", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default=None)
    parser.add_argument("-n", "--namespace", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, run, text in (
        ("approve", cmd_approve, "approve the pending change (shows it first)"),
        ("diff", cmd_diff, "show the pending change"),
        ("preview", cmd_preview, "preview the pending change's rows (waits for the report)"),
        ("restart", cmd_restart, "start a failed driver again from the last checkpoint"),
        ("status", cmd_status, "show phase, conditions, checkpoint and driver"),
        ("query", cmd_query, "read-only SQL over a Running pipeline's materialized state"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("name", help="the Pipeline")
        command.add_argument("-n", "--namespace", default=argparse.SUPPRESS)
        command.add_argument("--kubeconfig", default=argparse.SUPPRESS)
        command.add_argument("--context", default=argparse.SUPPRESS)
        if name == "query":
            command.add_argument("sql", help='one query, e.g. "SELECT * FROM v"')
            command.add_argument("--timeout", type=float, default=300.0, help="seconds")
            render.add_limit(command)
        if name == "approve":
            command.add_argument("--yes", "-y", action="store_true", help="do not ask")
        elif name != "restart":
            command.add_argument("--json", action="store_true", help="print JSON")
        if name == "preview":
            command.add_argument(
                "--timeout", type=float, default=900.0, help="seconds to wait for the report"
            )
        command.set_defaults(run=run)
    own_usage(parser)
    return parser


def _refused(error: Exception, args: argparse.Namespace) -> SpindleError | None:
    """What the API server's refusal, or its absence, means for the command: a reason and
    what to do (a traceback before); None for an error that is not about the API server."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from spindle.k8s.cluster import api_message

    if isinstance(error, ApiException):
        request = (
            f"`kubectl spindle {args.command}` on pipeline {args.name!r} in namespace "
            f"{_namespace(args)} ({error.status}: {api_message(error)})"
        )
        if error.status == 401:
            return SpindleError(
                reason="ApiRequestUnauthorized",
                message=f"The API server did not accept the credentials of the current "
                f"context for {request}. Log in again (a token may have expired), or check "
                "--kubeconfig/--context.",
            )
        if error.status == 403:
            return SpindleError(
                reason="ApiRequestForbidden",
                message=f"The API server refused {request}. Ask for the rights it needs (see "
                "docs/operator.md: the chart's viewer role reads pipelines; approving takes "
                "patch, and approval.restrictToGroup limits who may approve), or check "
                "--context.",
            )
        return SpindleError(
            reason="ApiRequestRefused",
            message=f"The API server refused {request}. Run the command again; if it fails "
            "again, see the API server's message.",
        )
    if isinstance(error, HTTPError | OSError) and not isinstance(error, BrokenPipeError):
        return SpindleError(
            reason="ApiServerUnreachable",
            message=f"Cannot reach the API server of the current context ({error}). Check "
            "that the cluster is up and --kubeconfig/--context name it.",
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed(build_parser(), argv)
    as_json = bool(getattr(args, "json", False))
    try:
        code: int = args.run(args)
        return code
    except SpindleError as error:
        render.print_error(error, as_json=as_json)
        return 1
    except EOFError:
        print("Not approved (no answer).")
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kubectl spindle status x | head`: the reader left
        return reader_gone()
    except Exception as error:
        refused = _refused(error, args)
        if refused is None:
            raise
        render.print_error(refused, as_json=as_json)
        return 1


if __name__ == "__main__":
    sys.exit(main())
