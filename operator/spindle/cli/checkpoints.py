"""`spindle checkpoints list URI` and `spindle checkpoints show URI [ID]`."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from spindle.checkpoint import Manifest
from spindle.checkpoint.store import open_store
from spindle.cli import render
from spindle.errors import SpindleError


def _summary(manifest: Manifest) -> dict[str, Any]:
    return {
        "id": manifest.id,
        "parent": manifest.parent,
        "created_at": manifest.created_at.isoformat(),
        "program_fingerprint": manifest.program.fingerprint[:12],
        "runtime_version": manifest.runtime_version,
        "bootstrap": manifest.bootstrap.change_id if manifest.bootstrap else None,
    }


def cmd_list(args: argparse.Namespace) -> int:
    store = open_store(args.uri)
    damaged: dict[str, str] = {}
    try:
        history = store.history()
    except SpindleError as error:  # a damaged one: list what can be read, and name it
        if error.reason != "CheckpointUnreadable":
            raise
        history, damaged = store.survey()
    if args.json:
        unreadable = [{"id": i, "unreadable": why} for i, why in sorted(damaged.items())]
        render.print_json([*(_summary(m) for m in history), *unreadable])
        return 0
    for checkpoint_id, why in sorted(damaged.items()):
        render.console(stderr=True).print(
            f"checkpoint {checkpoint_id} cannot be read: {why}", markup=False
        )
    if not history:
        render.console().print(
            f"No checkpoints at {args.uri}. A pipeline's root is <storage uri>/<namespace>/"
            "<name> (such as s3://bucket/pipelines/default/grades); `spindle local apply` "
            "prints a local pipeline's as 'state and checkpoints'.",
            markup=False,
        )
        return 0
    table = Table(title=f"Checkpoints at {args.uri} (newest first)", title_justify="left")
    longest = max(len(v) for m in history for v in (m.id, m.parent or "-"))
    for column in ("id", "parent"):  # whole, always: `checkpoints show` takes the exact id
        table.add_column(column, no_wrap=True, min_width=longest)
    for column in ("created", "program", "runtime", "bootstrap"):
        table.add_column(column)
    for manifest in history:
        row = _summary(manifest)
        table.add_row(
            row["id"],
            row["parent"] or "-",
            row["created_at"][:19],
            row["program_fingerprint"],
            row["runtime_version"],
            row["bootstrap"] or "",
        )
    render.console().print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store = open_store(args.uri)
    manifest = store.get(args.id) if args.id else store.latest()
    if manifest is None:
        raise SpindleError(
            reason="CheckpointNotFound",
            message=f"There is no checkpoint at {args.uri} yet; run the pipeline first.",
            details={"uri": args.uri},
        )
    if args.json:
        render.print_json(manifest.model_dump(mode="json"))
        return 0
    out = render.console()
    out.print(f"[bold]Checkpoint {manifest.id}[/] (parent {manifest.parent or '-'})")
    out.print(f"created {manifest.created_at.isoformat()}, runtime {manifest.runtime_version}")
    table = Table(title="State", title_justify="left")
    for column in ("relation", "kind", "delta version", "path"):
        table.add_column(column)
    for name, record in sorted(manifest.state.items()):
        table.add_row(name, record.kind, str(record.version), record.path)
    out.print(table)
    for key, connector in sorted(manifest.connectors.items()):
        out.print(f"connector {key} ({connector.direction}): offset {connector.offset}")
    if manifest.bootstrap:
        out.print(f"bootstrap of change {manifest.bootstrap.change_id}")
    out.print("program:", style="bold")
    out.print(manifest.program.text, markup=False)
    return 0


def register(sub: Any) -> None:
    group = sub.add_parser("checkpoints", help="inspect a pipeline's checkpoints")
    actions = group.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the latest checkpoint and its ancestors")
    listing.add_argument("uri", help="pipeline root, e.g. s3://bucket/prefix/<ns>/<name>")
    listing.add_argument("--json", action="store_true", help="print one JSON array")
    listing.set_defaults(run=cmd_list)
    show = actions.add_parser("show", help="one checkpoint's manifest (default: the latest)")
    show.add_argument("uri", help="pipeline root, e.g. s3://bucket/prefix/<ns>/<name>")
    show.add_argument(
        "id", nargs="?", help="checkpoint id, as `checkpoints list` prints it (default: latest)"
    )
    show.add_argument("--json", action="store_true", help="print the manifest as one JSON object")
    show.set_defaults(run=cmd_show)
