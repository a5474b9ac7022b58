"""`spindle local ...` and `spindle query`: the embedded default, with no cluster."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from spindle.api import Phase, PipelineManifest, load_manifest_document
from spindle.api.status import PipelineStatus
from spindle.cli import files, render, served, server_commands
from spindle.cli.sql_origin import SqlOrigin, sql_origin
from spindle.errors import SpindleError
from spindle.lifecycle import Decision
from spindle.lifecycle.status import omitted_note
from spindle.local import runner
from spindle.local.home import LocalPipeline, home_path
from spindle.wording import counted


def _pipeline(args: argparse.Namespace, name: str | None = None) -> LocalPipeline:
    return LocalPipeline(home_path(args.home), name or args.name)


def _say(message: str) -> None:
    render.console(stderr=True).print(message, markup=False)


class BootstrapProgress:
    """A progress bar over the views a bootstrap evaluates (lines when not on a terminal)."""

    def __init__(self) -> None:
        from spindle.runtime.loop import reporter, view_line

        self.lines = reporter(_say)
        self.view_line = view_line
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, event: str, **fields: Any) -> None:
        if event == "bootstrap-view" and self.bar is not None and self.task is not None:
            self.bar.console.print(self.view_line(**fields), markup=False)
            self.bar.update(self.task, advance=1, description=str(fields["view"]))
            return
        self.lines(event, **fields)
        if event == "bootstrap-start":
            self.bar = Progress(
                TextColumn("bootstrap"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=render.console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("", total=fields["views"])
            self.bar.start()
        elif event == "bootstrap-done" and self.bar is not None:
            self.bar.stop()
            self.bar = None


def _show_status(
    pipeline: LocalPipeline,
    status: PipelineStatus,
    decision: Decision,
    origin: SqlOrigin | None = None,
) -> None:
    out = render.console()
    out.print(f"Pipeline [bold]{pipeline.name}[/]: phase [bold]{status.phase.value}[/]")
    for condition in status.conditions:
        said = origin.said(condition.message) if origin else condition.message
        out.print(f"  {condition.reason}: {said}", markup=False)
    plan = decision.plan
    if status.pending_change is not None and plan is not None:
        render.print_plan(
            plan,
            out,
            policy=pipeline.manifest().spec.bootstrap_policy,
            approved=pipeline.approval == plan.change_id,
        )
        _print_preview(pipeline, status, out=out)
    elif decision.program is not None:  # the plan shows them with a change
        for warning in decision.program.warnings:
            out.print(f"  warning: {warning}", markup=False)
    if status.last_checkpoint is not None:
        out.print(f"  last checkpoint: {status.last_checkpoint.id}")


def _print_preview(pipeline: LocalPipeline, status: PipelineStatus, *, out: Console) -> None:
    """The pending change's preview counts as the status keeps them, and what it left out
    (`bounded`: 100 views, those whose rows differ first) with where the whole report is."""
    pending = status.pending_change
    if pending is None:
        return
    render.print_preview(pending.preview, change_id=pending.id, out=out)
    note = omitted_note(pending.model_dump(mode="json"), prefix="preview.")
    if note is not None:
        root, _ = pipeline.storage_root()
        out.print(f"{note} The whole report is {root}/previews/{pending.id}.json.", markup=False)


def read_manifest(path: str) -> PipelineManifest:
    """A Pipeline manifest from a YAML or JSON file (`-`: standard input), validated."""
    return read_manifest_at(path)[0]


def read_manifest_at(path: str) -> tuple[PipelineManifest, SqlOrigin | None]:
    """A manifest, and where its `spec.sql` is in the file (for the positions of errors)."""
    data = files.read_bytes(path, limit=files.MAX_MANIFEST_BYTES)
    document = files.load_yaml(data, path=path)
    manifest = load_manifest_document(document, source=path)
    return manifest, sql_origin(data, path="standard input" if path == "-" else path)


def cmd_apply(args: argparse.Namespace) -> int:
    """Record and plan the manifest; a program the plan fails on (phase `Failed`) exits 1, as
    `spindle plan -f` does, though it is recorded and its status printed."""
    manifest, origin = read_manifest_at(args.file)
    pipeline = _pipeline(args, manifest.metadata.name)
    generation = pipeline.save(manifest)
    try:
        status, decision = runner.status(pipeline, say=_say, shown=True)
    except SpindleError:  # its storage, say: what failed follows, but the apply is recorded
        if not args.json:
            render.console().print(
                f"pipeline/{pipeline.name} applied (generation {generation}); its status "
                "cannot be observed now:"
            )
        raise
    if args.json:
        render.print_json(status.to_json())
    else:
        out = render.console()
        out.print(f"pipeline/{pipeline.name} applied (generation {generation})")
        root, _ = pipeline.storage_root()
        named = " (spec.storage: runs here read and write there)" * (
            manifest.spec.storage is not None
        )
        out.print(f"  state and checkpoints: {root}{named}")
        _show_status(pipeline, status, decision, origin)
    return 1 if status.phase is Phase.FAILED else 0


def cmd_status(args: argparse.Namespace) -> int:
    """The status, exit 0 whatever its phase (`Failed` included): the query succeeded."""
    pipeline = _pipeline(args)
    status, decision = runner.status(pipeline, say=_say, shown=True)
    if args.json:
        render.print_json(status.to_json())
    else:
        _show_status(pipeline, status, decision)
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    pipeline = _pipeline(args)
    status, decision = runner.status(pipeline, say=_say)
    pending = status.pending_change
    if decision.reason == "BootstrapRejected":
        raise SpindleError(
            reason="BootstrapRejected",
            message=f"Pipeline '{pipeline.name}' has bootstrapPolicy reject, so no approval "
            "starts its change. Set spec.bootstrapPolicy to await_approval (or allow) and "
            "apply the manifest again, or revert the change. Nothing was approved.",
            details={"phase": status.phase.value},
        )
    if pending is None:
        raise SpindleError(
            reason="NoPendingChange",
            message=f"Pipeline '{pipeline.name}' has no change awaiting approval "
            f"(phase {status.phase.value}); nothing was approved.",
            details={"phase": status.phase.value},
        )
    if pipeline.approval == pending.id == args.change_id and render.underway(
        phase=status.phase.value, reason=decision.reason
    ):  # approving again (a script run twice) is no error
        render.console().print(
            render.approved_already(
                f"'{pipeline.name}'", change=pending.id, phase=status.phase.value
            )
            + f" `spindle local run {pipeline.name}` bootstraps it."
        )
        return 0
    if status.phase is not Phase.AWAITING_APPROVAL:  # shown for review, but it cannot run
        raise SpindleError(
            reason="NoPendingChange",
            message=render.not_awaiting_approval(
                f"'{pipeline.name}'",
                change=pending.id,
                phase=status.phase.value,
                reason=decision.reason,
                said=decision.message,
                shown_by=f"`spindle local status {pipeline.name}`",
            ),
            details={"phase": status.phase.value, "reason": decision.reason},
        )
    if args.change_id != pending.id:
        raise SpindleError(
            reason="ApprovalMismatch",
            message=f"Change {args.change_id} is not the pending change; the pending change is "
            f"{pending.id}. Review it with `spindle local status {pipeline.name}`, then "
            f"approve {pending.id}. Nothing was approved.",
            details={"pending": pending.id, "given": args.change_id},
        )
    _print_preview(pipeline, status, out=render.console())
    pipeline.approve(args.change_id)
    render.console().print(
        f"Approved change {args.change_id}. `spindle local run {pipeline.name}` bootstraps it."
    )
    return 0


def cmd_restate(args: argparse.Namespace) -> int:
    """Ask to recompute views (and their dependents) without an SQL change: a pending change
    with reason `restate`, approved like any other."""
    pipeline = _pipeline(args)
    pipeline.record()
    if runner.start_from(pipeline, adopt=False) is None:  # nothing stored to recompute yet
        raise SpindleError(
            reason="NoCheckpoint",
            message=f"Pipeline {pipeline.name} has no checkpoint yet: nothing is stored to "
            f"recompute, and its first run (spindle local run {pipeline.name}) computes every "
            "view. Nothing was requested.",
        )
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%f")
    previous = pipeline.restate
    pipeline.request_restate(f"{','.join(args.views)}@{stamp}")
    status, decision = runner.status(pipeline, say=lambda _: None)
    if decision.reason == "UnknownRelation":
        pipeline.request_restate(previous)  # refused: the earlier request stays as it was
        runner.status(pipeline, say=_say)
        raise SpindleError(reason=decision.reason, message=decision.message)
    if args.json:
        render.print_json(status.to_json())
    else:
        _show_status(pipeline, status, decision)
    return 0 if status.pending_change is not None else 1


def cmd_preview(args: argparse.Namespace) -> int:
    """Evaluate the pending change's views in scratch space and print what they would become."""
    from spindle.runtime.loop import reporter

    pipeline = _pipeline(args)
    report, status = runner.preview(
        pipeline, say=_say, report=reporter(_say), stop=served.stop_event()
    )
    if report.error is not None:
        raise SpindleError(reason=report.error.reason, message=report.error.message)
    if args.json:
        render.print_json(report.to_json())
        return 0
    out = render.console()
    out.print(report.headline(), markup=False)
    render.print_preview(report.to_json(), change_id=report.change_id, out=out)
    pending = status.pending_change
    if pending is not None:
        out.print(
            f"Approve it with `spindle local approve {pipeline.name} {pending.id}`; the "
            "bootstrap evaluates again from the committed checkpoint.",
            markup=False,
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    runner.run(
        _pipeline(args),
        until_idle=args.until_idle,
        say=_say,
        report=BootstrapProgress(),
        stop=served.stop_event(),
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    pipeline = _pipeline(args)
    pipeline.record()
    if runner.stop(pipeline, force=args.force):
        render.console().print(f"Stopped pipeline '{pipeline.name}'.")
    else:
        render.console().print(f"Pipeline '{pipeline.name}' is not running.")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from spindle.program import parse_program
    from spindle.program.queries import check_query, materialized, row_limit
    from spindle.runtime.loop import reporter

    pipeline = _pipeline(args)
    manifest = pipeline.store().latest()
    if manifest is None:
        raise SpindleError(
            reason="CheckpointNotFound",
            message=f"Pipeline '{pipeline.name}' has no checkpoint yet; run it first.",
        )
    program = parse_program(manifest.program.text)
    check_query(args.sql, relations=materialized(program))  # refused before Spark starts
    row_limit(args.limit)
    runtime = runner.open_runtime(pipeline, report=reporter(_say))
    found = runtime.query(program, manifest, args.sql, limit=args.limit)
    render.print_rows(
        list(found.rows), columns=found.columns, as_json=args.json, truncated=found.truncated
    )
    return 0


def cmd_execute(args: argparse.Namespace) -> int:
    from spindle.checkpoint.objects import open_objects
    from spindle.local.adhoc import parse_insert, write_batch
    from spindle.program import parse_program

    pipeline = _pipeline(args)
    table, rows = parse_insert(args.sql, parse_program(pipeline.manifest().spec.sql))
    root, options = pipeline.storage_root()
    key = write_batch(open_objects(root, s3=options), table, rows)
    render.console().print(
        f"Queued {counted(len(rows), 'row')} for table {table} ({key}); the next step ingests them."
    )
    return 0


def idle_seconds(text: str) -> float:
    """`--idle-timeout`: seconds above 0, else a usage error (exit status 2)."""
    from spindle.cli.warm_client import idle_timeout

    try:
        return idle_timeout(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds greater than 0, e.g. 600 (got {text!r})"
        ) from None


JSON_HELP = "print the status as one JSON object"
NAME_HELP = "the pipeline's name (metadata.name of its manifest)"


def _home_options(*, served: bool) -> argparse.ArgumentParser:
    """`--home`, and the warm server's options: shown by commands the server may run
    (`served`); accepted but not listed by those that always run in their own process."""
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument("--home", help="local state (default: $SPINDLE_HOME, else ~/.spindle)")
    home.add_argument(
        "--no-server",
        action="store_true",
        help="run in this process, without the home's warm Spark server ($SPINDLE_NO_SERVER=1)"
        if served
        else argparse.SUPPRESS,
    )
    home.add_argument(
        "--idle-timeout",
        type=idle_seconds,
        default=600.0,
        help="seconds the warm Spark server waits for the next command before it stops"
        if served
        else argparse.SUPPRESS,
    )
    return home


def register(sub: Any) -> None:
    home, own = _home_options(served=True), _home_options(served=False)
    local = sub.add_parser("local", help="run pipelines locally, with no cluster")
    actions = local.add_subparsers(dest="action", required=True)

    apply = actions.add_parser("apply", parents=[home], help="record a Pipeline manifest, plan it")
    apply.add_argument("-f", "--file", required=True, help="manifest (YAML or JSON; - for stdin)")
    apply.add_argument("--json", action="store_true", help=JSON_HELP)
    apply.set_defaults(run=cmd_apply)

    for name, handler, helptext in (
        ("status", cmd_status, "phase, pending change and last checkpoint"),
        ("run", cmd_run, "run in the foreground (bootstrapping first when approved)"),
        ("stop", cmd_stop, "stop a running pipeline gracefully (--force: at once)"),
    ):
        command = actions.add_parser(name, parents=[own if name == "stop" else home], help=helptext)
        command.add_argument("name", help=NAME_HELP)
        command.set_defaults(run=handler)
        if name == "status":
            command.add_argument("--json", action="store_true", help=JSON_HELP)
        if name == "run":
            command.add_argument(
                "--until-idle",
                action="store_true",
                help="exit once all available input is processed",
            )
        if name == "stop":
            command.add_argument(
                "--force",
                action="store_true",
                help="kill the run at once (SIGKILL), not after it commits its step; the next run "
                "redoes that step",
            )

    approve = actions.add_parser("approve", parents=[home], help="approve the pending change")
    approve.add_argument("name", help=NAME_HELP)
    approve.add_argument("change_id", help="the pending change's id, as `local status` shows it")
    approve.set_defaults(run=cmd_approve)

    restate = actions.add_parser(
        "restate", parents=[own], help="recompute views without an SQL change (approve it)"
    )
    restate.add_argument("name", help=NAME_HELP)
    restate.add_argument("views", nargs="+", metavar="VIEW", help="a view to recompute")
    restate.add_argument("--json", action="store_true", help=JSON_HELP)
    restate.set_defaults(run=cmd_restate)

    preview = actions.add_parser(
        "preview", parents=[home], help="evaluate the pending change in scratch space, show rows"
    )
    preview.add_argument("name", help=NAME_HELP)
    preview.add_argument("--json", action="store_true", help="print the report as one JSON object")
    preview.set_defaults(run=cmd_preview)

    execute = actions.add_parser("execute", parents=[home], help="insert rows ad hoc")
    execute.add_argument("name", help=NAME_HELP)
    execute.add_argument("sql", help="INSERT INTO t VALUES (...), ...")
    execute.set_defaults(run=cmd_execute)

    server_commands.register(actions, own)

    query = sub.add_parser("query", parents=[home], help="Spark SQL over materialized state")
    query.add_argument("name", help=NAME_HELP)
    query.add_argument("sql", help="one SELECT over the pipeline's materialized tables and views")
    query.add_argument("--json", action="store_true", help="print the rows as one JSON array")
    render.add_limit(query)
    query.set_defaults(run=cmd_query)
