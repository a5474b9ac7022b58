"""A data-diff preview's report: what approving a pending change would do to each view's rows.

The runtime computes it in scratch space (`runtime/preview.py`), the checkpoint store keeps it
beside the checkpoints (`previews/<change id>.json`), the lifecycle puts its counts on
`status.pendingChange.preview`, and the CLI prints it as tables. Here it is plain data: one
frozen type with one JSON form, read back by every body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from spindle.program import View
from spindle.program.queries import plain
from spindle.wording import counted

PREVIEW_FORMAT = 1


@dataclass(frozen=True)
class Changed:
    """One row matched before and after whose values differ."""

    before: Mapping[str, Any]
    after: Mapping[str, Any]


@dataclass(frozen=True)
class ViewPreview:
    """One evaluated view: its rows at the checkpoint and after the change, compared."""

    name: str
    status: str
    """`added` (a new view: every row is added) or `modified`."""
    matched_by: tuple[str, ...]
    """The key columns rows are matched on (a GROUP BY's); empty: the whole row."""
    rows_before: int
    rows_after: int
    added: int
    removed: int
    changed: int
    changed_columns: tuple[str, ...] = ()
    """Columns whose value differs in at least one matched row, and columns only one side has."""
    added_samples: tuple[Mapping[str, Any], ...] = ()
    removed_samples: tuple[Mapping[str, Any], ...] = ()
    changed_samples: tuple[Changed, ...] = ()

    def counts(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "matchedBy": list(self.matched_by),
            "rowsBefore": self.rows_before,
            "rowsAfter": self.rows_after,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "changedColumns": list(self.changed_columns),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.counts(),
            "samples": {
                "added": [plain(r) for r in self.added_samples],
                "removed": [plain(r) for r in self.removed_samples],
                "changed": [
                    {"before": plain(c.before), "after": plain(c.after)}
                    for c in self.changed_samples
                ],
            },
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ViewPreview:
        samples = body.get("samples") or {}
        return cls(
            name=body["name"],
            status=body["status"],
            matched_by=tuple(body.get("matchedBy") or ()),
            rows_before=int(body["rowsBefore"]),
            rows_after=int(body["rowsAfter"]),
            added=int(body["added"]),
            removed=int(body["removed"]),
            changed=int(body["changed"]),
            changed_columns=tuple(body.get("changedColumns") or ()),
            added_samples=tuple(samples.get("added") or ()),
            removed_samples=tuple(samples.get("removed") or ()),
            changed_samples=tuple(
                Changed(c["before"], c["after"]) for c in samples.get("changed") or ()
            ),
        )


@dataclass(frozen=True)
class PreviewError:
    """Why a preview produced no report (`PreviewFailed`, `PreviewTimedOut`, ...)."""

    reason: str
    message: str


@dataclass(frozen=True)
class PreviewReport:
    """A preview of one change, evaluated from one checkpoint: a view per new or modified view,
    in dependency order, or the error that stopped it (then no views)."""

    change_id: str
    checkpoint: str
    created_at: str
    sample_rows: int
    views: tuple[ViewPreview, ...] = ()
    error: PreviewError | None = None
    request: str | None = None
    """The preview request it serves (`spindle.dev/preview`); None for `spindle local preview`."""
    format: int = field(default=PREVIEW_FORMAT)

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> dict[str, Any]:
        """The counts `status.pendingChange.preview` carries (no sample rows)."""
        summary: dict[str, Any] = {
            "checkpoint": self.checkpoint,
            "createdAt": self.created_at,
            "views": {v.name: v.counts() for v in self.views},
        }
        if self.request is not None:
            summary["request"] = self.request
        return summary

    def headline(self) -> str:
        if self.error is not None:
            return f"{self.error.reason}: {self.error.message}"
        added = sum(v.added for v in self.views)
        removed = sum(v.removed for v in self.views)
        changed = sum(v.changed for v in self.views)
        count = len(self.views)
        return (
            f"Preview of change {self.change_id}: {counted(count, 'view')}, "
            f"{added:,} rows added, {removed:,} removed, {changed:,} changed"
        )

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "format": self.format,
            "changeId": self.change_id,
            "checkpoint": self.checkpoint,
            "createdAt": self.created_at,
            "sampleRows": self.sample_rows,
            "views": [v.to_json() for v in self.views],
        }
        if self.error is not None:
            body["error"] = {"reason": self.error.reason, "message": self.error.message}
        if self.request is not None:
            body["request"] = self.request
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PreviewReport:
        error = body.get("error")
        return cls(
            change_id=body["changeId"],
            checkpoint=body["checkpoint"],
            created_at=body["createdAt"],
            sample_rows=int(body.get("sampleRows", 0)),
            views=tuple(ViewPreview.from_json(v) for v in body.get("views") or ()),
            error=PreviewError(error["reason"], error["message"]) if error else None,
            request=body.get("request"),
            format=int(body.get("format", PREVIEW_FORMAT)),
        )


def key_columns(view: View) -> tuple[str, ...]:
    """The output columns a view's GROUP BY makes unique, when every grouping expression is
    selected (rows are then matched on them); empty: rows are matched whole."""
    query = view.query
    group = query.args.get("group") if isinstance(query, exp.Select) else None
    if not isinstance(query, exp.Select) or group is None or not group.expressions:
        return ()
    outputs = {(s.this if isinstance(s, exp.Alias) else s): s.alias_or_name for s in query.selects}
    names = []
    for key in group.expressions:
        name = outputs.get(key)
        if name is None:
            return ()
        names.append(name)
    return tuple(names)
