"""Readable renderings of plans and errors for terminals (rich), shared by every command."""

from __future__ import annotations

import difflib
import functools
import json
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads on first use, so `--json` output starts faster
    import argparse
    from collections.abc import Mapping, Sequence

    from rich.console import Console
    from rich.table import Table

from spindle.api import BootstrapPolicy, Phase
from spindle.errors import SpindleError
from spindle.plan import ChangePlan
from spindle.wording import counted

STATUS_STYLE = {"added": "green", "removed": "red", "modified": "yellow"}
UNBOUNDED_WIDTH = 1_000_000
"""The width of a `wide` console that is not a terminal: tables take their content's width."""


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class QuietConsole(Console):
        """A console that, when its reader left (`spindle ... | head -1`), ends the command
        as `cli.main` does: quietly, with the status of a writer that SIGPIPE ended (rich's
        own exits with 1). It stays a `SystemExit`: no `except Exception` mistakes it for
        the command's failure."""

        def on_broken_pipe(self) -> None:
            from spindle.cli.main import reader_gone

            self.quiet = True
            raise SystemExit(reader_gone())

    return QuietConsole


def console(*, stderr: bool = False) -> Console:
    """A console for the command's output (`stderr`: its messages). When the output is not a
    terminal, lines are as long as their content: a table's cells are never cut to 80
    columns, so a pipe, a file or a CI log gets each whole name and value."""
    out = _console_class()(stderr=stderr, highlight=False, soft_wrap=True)
    if not stderr and not out.is_terminal:
        out.width = UNBOUNDED_WIDTH
    return out


def plan_table(plan: ChangePlan) -> Table:
    body = plan.to_json()
    return change_table(plan.change_id, body["changes"], body)


def change_table(change_id: str, changes: dict[str, Any], diff: dict[str, Any]) -> Table:
    """The change table from a plan's JSON, or a recorded one (`status.pendingChange`).
    Names are the user's text: escaped, so that `[...]` in a quoted name is not markup."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Change {change_id}", title_justify="left")
    for column in ("object", "kind", "status", "reasons", "category"):
        table.add_column(column)
    for name in sorted(changes):
        change = changes[name]
        style = STATUS_STYLE[change["status"]]
        table.add_row(
            escape(name),
            change["kind"],
            f"[{style}]{change['status']}[/]",
            escape(", ".join(change.get("reasons") or [])),
            change.get("category") or "",
        )
    for list_name, keys in diff.items():
        if list_name.endswith("_connectors"):
            status, direction, _ = list_name.split("_", 2)
            for key in keys:
                table.add_row(
                    escape(key), f"{direction} connector", f"[{STATUS_STYLE[status]}]{status}[/]"
                )
    return table


def query_diffs(plan: ChangePlan) -> list[str]:
    """Unified diffs of each directly modified view's statement."""
    blocks = []
    for name in sorted(plan.changes):
        change = plan.changes[name]
        if change.kind == "view" and "query" in change.reasons:
            old, new = plan.old.views[name].text, plan.new.views[name].text
            lines = difflib.unified_diff(
                old.splitlines(), new.splitlines(), f"old/{name}", f"new/{name}", lineterm=""
            )
            blocks.append("\n".join(lines))
    return blocks


def _count(value: Any, unit: str) -> str:
    """`1 row`, `2,000 rows` or `rows unknown`, for a plural `unit`."""
    return f"{unit} unknown" if value is None else counted(value, unit.removesuffix("s"), unit)


NOT_KEPT = "not kept in the status"
"""What the estimate says of the entries a status left out of a list (`pendingChange.omitted`)."""


def _listed(names: Sequence[str], left_out: int, noun: str) -> str:
    """`a, b`, `none`, or, for a list the status cut, what it kept and `and N more (not kept
    in the status)` (`N <noun>s (...)` when it kept none): never `none` for a list that has
    entries."""
    kept = ", ".join(names)
    if not left_out:
        return kept or "none"
    if not kept:
        return f"{counted(left_out, noun)} ({NOT_KEPT})"
    return f"{kept} and {left_out:,} more ({NOT_KEPT})"


def estimate_lines(estimate: dict[str, Any], omitted: Mapping[str, int] | None = None) -> list[str]:
    """The estimate (`status.pendingChange.estimate`, or a plan's) as plain lines. `omitted`
    (`status.pendingChange.omitted`) counts the entries a status left out of its lists, by
    dotted path (`estimate.outputs`): a cut list says how many more it has."""

    def left_out(field: str) -> int:
        return int((omitted or {}).get(f"estimate.{field}") or 0)

    def listed(field: str, noun: str, names: Sequence[str] | None = None) -> str:
        found = (estimate.get(field) or []) if names is None else names
        return _listed(found, left_out(field), noun)

    def has(field: str) -> bool:
        """Whether the list has entries, kept in the status or not."""
        return bool(estimate.get(field)) or left_out(field) > 0

    size = (
        "size unknown"
        if estimate.get("inputRows") is None
        else f"{_count(estimate.get('inputRows'), 'rows')}, "
        f"{_count(estimate.get('inputBytes'), 'bytes')}"
    )
    read = listed("storedRelationsRead", "relation")
    lines = [
        f"Estimate: {estimate['headline']}",
        f"  views to evaluate: {listed('viewsToEvaluate', 'view')}",
        f"  stored state read: {size} ({read})"
        if not left_out("storedRelationsRead")  # no parentheses in parentheses
        else f"  stored state read: {size}, of {read}",
        f"  rows read from connectors: {estimate.get('connectorRows', 0)} "
        f"({estimate.get('connectorRowsNote')})",
    ]
    if has("tablesEmptied"):
        dropped = [
            f"{t['name']} (stored rows unknown)"
            if t.get("storedRows") is None
            else f"{t['name']} ({_count(t['storedRows'], 'stored rows')} dropped)"
            for t in estimate.get("tablesEmptied") or []
        ]
        emptied = listed("tablesEmptied", "table", dropped)
        lines.append(f"  tables emptied by the change: {emptied}")
    if has("inputsRestarted"):
        restarted = listed("inputsRestarted", "input")
        lines.append(f"  inputs read again from their start after the bootstrap: {restarted}")
    if has("sizesUnknown"):
        lines.append(
            "  no statistics (no checkpoint, or its Delta log does not say) for: "
            + listed("sizesUnknown", "relation")
        )
    mode = estimate.get("outputsOnBootstrap", "replace")
    verb = {"replace": "replaced", "append": "appended to", "silent": "left alone (silent)"}
    outputs = listed("outputs", "output")
    lines.append(f"  outputs {verb.get(mode, mode)}: {outputs}")
    rate = estimate.get("throughput")
    basis = (
        f"at {rate['rowsPerSecond']:,} rows/s, the latest {rate['from']}'s"
        if rate
        else "no throughput recorded yet"
    )
    lines.append(f"  duration: {estimate.get('duration', 'unknown')} ({basis})")
    return lines


def print_estimate(
    estimate: dict[str, Any] | None,
    out: Console | None = None,
    *,
    omitted: Mapping[str, int] | None = None,
) -> None:
    if not estimate:
        return
    out = out or console()
    for line in estimate_lines(estimate, omitted):
        out.print(line, markup=False)


def _preview_views(preview: dict[str, Any]) -> list[dict[str, Any]]:
    """The views of a preview report (a list, with samples) or of its counts in the status
    (`status.pendingChange.preview`: a mapping by name)."""
    views = preview.get("views") or []
    if isinstance(views, dict):
        return [{"name": name, **counts} for name, counts in views.items()]
    return list(views)


def preview_tables(preview: dict[str, Any], *, change_id: str) -> list[Table | str]:
    """A preview as tables: the counts per view, how each view's rows were matched, then each
    view's sample rows (when the report has them: `+` added, `-` removed, `before`/`after`
    for a changed row)."""
    from rich.markup import escape
    from rich.table import Table

    views = _preview_views(preview)
    title = (
        f"Preview of change {change_id} from checkpoint {preview.get('checkpoint')} "
        "(evaluated in scratch space, nothing committed)"
    )
    counts = Table(title=title, title_justify="left")
    counts.add_column("view")
    counts.add_column("status")
    for column in ("before", "after", "added", "removed", "changed"):
        counts.add_column(column, justify="right")
    for view in views:
        counts.add_row(
            escape(view["name"]),
            view["status"],
            f"{view['rowsBefore']:,}",
            f"{view['rowsAfter']:,}",
            f"[green]{view['added']:,}[/]",
            f"[red]{view['removed']:,}[/]",
            f"[yellow]{view['changed']:,}[/]",
        )
    tables: list[Table | str] = [counts]
    for view in views:
        matched = ", ".join(view.get("matchedBy") or []) or "the whole row"
        moved = ", ".join(view.get("changedColumns") or []) or "none"
        tables.append(
            f"  {escape(view['name'])}: rows matched by {escape(matched)}; "
            f"changed columns: {escape(moved)}"
        )
    for view in views:
        samples = view.get("samples") or {}
        rows = [("+", r) for r in samples.get("added") or []]
        rows += [("-", r) for r in samples.get("removed") or []]
        for pair in samples.get("changed") or []:
            rows += [("before", pair["before"]), ("after", pair["after"])]
        if not rows:
            continue
        sample = Table(
            title=f"{view['name']}: sample rows (up to {preview.get('sampleRows')} of each kind)",
            title_justify="left",
        )
        sample.add_column("")
        columns = list(rows[0][1])
        for column in columns:
            sample.add_column(escape(column))
        for kind, row in rows:
            sample.add_row(kind, *(escape(_cell(row.get(c))) for c in columns))
        tables.append(sample)
    return tables


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Characters a terminal acts on (escape sequences retitle it, recolour it, move the cursor):
a stored string holds them as data, and a table shows each as a backslash, x and its hex."""


def _cell(value: Any) -> str:
    """A value (`program.queries.plain`) as a table shows it: NULL, true and false as SQL
    writes them, a list or map as JSON, control characters escaped."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def print_preview(
    preview: dict[str, Any] | None, *, change_id: str, out: Console | None = None
) -> None:
    if not preview:
        return
    out = out or console()
    for table in preview_tables(preview, change_id=change_id):
        out.print(table)


NEXT_STEP = {
    BootstrapPolicy.AWAIT_APPROVAL: "Bootstrap: allowed. Approve with change id [bold]{id}[/].",
    BootstrapPolicy.ALLOW: "Bootstrap: allowed, and bootstrapPolicy allow starts it (change "
    "[bold]{id}[/]) without an approval.",
    BootstrapPolicy.REJECT: "[red]Bootstrap: possible, but bootstrapPolicy is reject:[/] change "
    "[bold]{id}[/] will not run. Revert the change, or set bootstrapPolicy to await_approval "
    "or allow.",
}
"""What a plan whose bootstrap is possible leads to, under each bootstrap policy."""
APPROVED = "Bootstrap: allowed, and change [bold]{id}[/] is approved."
"""A plan whose change was approved (locally: before the run that bootstraps it)."""


def print_plan(
    plan: ChangePlan,
    out: Console | None = None,
    *,
    policy: BootstrapPolicy = BootstrapPolicy.AWAIT_APPROVAL,
    approved: bool = False,
) -> None:
    """The change, how each view is maintained, its warnings and estimate, and the next step
    under `policy` (the manifest's `spec.bootstrapPolicy`; two program files have none), or
    that it is `approved` already."""
    from rich.markup import escape

    out = out or console()
    if plan.diff.is_empty:
        out.print("No changes: the programs are equivalent.")
        _print_warnings(plan, out)
        return
    out.print(plan_table(plan))
    for block in query_diffs(plan):
        out.print(block, markup=False)
    recomputed = {n: m.reason for n, m in plan.maintenance.items() if m.reason}
    incremental = [n for n, m in plan.maintenance.items() if not m.reason]
    if incremental:
        out.print(f"Maintained incrementally: {escape(', '.join(incremental))}")
    for name, reason in recomputed.items():
        out.print(f"[yellow]Recomputed each step:[/] {escape(name)} ({escape(reason or '')})")
    _print_warnings(plan, out)
    print_estimate(plan.estimate.to_json() if plan.estimate else None, out)
    if plan.bootstrap.allowed:
        out.print((APPROVED if approved else NEXT_STEP[policy]).format(id=plan.change_id))
    else:
        out.print(f"[red]Bootstrap refused: {plan.bootstrap.error_code}[/]")
        out.print(plan.bootstrap.message or "", markup=False)


def _print_warnings(plan: ChangePlan, out: Console) -> None:
    """The new program's warnings (`ProgramWarnings`: what Spindle ignores), changed or not."""
    from rich.markup import escape

    for warning in plan.new.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")


def underway(*, phase: str, reason: str) -> bool:
    """Whether a status in `phase` with Ready reason `reason` shows a change that is on its way:
    bootstrapping, or (locally) approved and waiting for `spindle local run`."""
    return phase == Phase.BOOTSTRAPPING or reason in ("Bootstrapping", "NotRunning")


def approved_already(name: str, *, change: str, phase: str) -> str:
    """An approval of change `change` that was given before: nothing to do (exit 0)."""
    return f"Change {change} of pipeline {name} is approved already (phase {phase}); nothing to do."


def not_awaiting_approval(
    name: str,
    *,
    change: str,
    phase: str,
    reason: str,
    said: str,
    shown_by: str,
    nothing: str = "Nothing was approved",
) -> str:
    """Why no approval is taken for change `change` of pipeline `name`, whose status shows it
    in `phase` (not `AwaitingApproval`) with Ready reason `reason` and message `said` (which
    says what to do); `shown_by` is the command that shows the change."""
    state = (
        "is approved already, or needs no approval (bootstrapPolicy allow)"
        if underway(phase=phase, reason=reason)
        else "will not run, so an approval would not start it"
    )
    return (
        f"Pipeline {name} has no change awaiting approval: its phase is {phase} ({reason}), "
        f"and change {change} {state}. {said} {nothing}; {shown_by} shows the "
        "change."
    )


def print_error(error: SpindleError, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(error.body(), indent=2))
        return
    from rich.markup import escape

    err = console(stderr=True)
    err.print(f"[red]error[/] [bold]{error.reason}[/]: {escape(error.message)}", markup=True)
    more = error.details.get("more") or []
    for message in more:
        err.print(f"  also: {message}", markup=False)
    left = int(error.details.get("problems") or 0) - 1 - len(more)
    if left > 0:
        err.print(f"  and {left} more")


def add_limit(command: argparse.ArgumentParser) -> None:
    """`--limit` of both query commands (`program.queries.MAX_QUERY_ROWS` at most)."""
    from spindle.program.queries import MAX_QUERY_ROWS

    command.add_argument(
        "--limit",
        type=int,
        default=MAX_QUERY_ROWS,
        help=f"rows to show at most (default and largest: {MAX_QUERY_ROWS})",
    )


def print_rows(
    rows: list[dict[str, Any]],
    *,
    columns: Sequence[str] | None = None,
    as_json: bool,
    truncated: bool = False,
) -> None:
    """A query's result (`spindle query`, `kubectl spindle query`): rows as JSON values
    (`program.queries.plain`), a JSON array or a table with a row count; the table has its
    `columns` as header even without rows (when known; else the first row's). A cut answer
    says so (on stderr with `--json`, so the array stays the whole output)."""
    first = "the first row" if len(rows) == 1 else f"the first {len(rows):,} rows"
    cut = (
        f"{first}: the query has more. Narrow it with WHERE or LIMIT "
        "(ORDER BY decides which rows come first)."
    )
    if as_json:
        print(json.dumps(rows, indent=2))
        if truncated:
            print(f"Showing {cut}", file=sys.stderr)
        return
    from rich.markup import escape
    from rich.table import Table

    if columns is None:
        columns = list(rows[0]) if rows else []
    table = Table(show_header=True)
    for column in columns:
        table.add_column(escape(_cell(column)))
    for row in rows:  # NULL as NULL (not `None`, a string's text); values are not markup
        table.add_row(*(escape(_cell(row.get(c))) for c in columns))
    out = console()
    if columns:  # a table without columns would be a blank line: the count says it
        out.print(table)
    out.print(f"({cut})" if truncated else f"({counted(len(rows), 'row')})")


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
