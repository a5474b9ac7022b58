"""A data-diff preview: evaluate a pending change's new and modified views in scratch space and
compare each with its checkpointed contents, committing nothing.

It runs the bootstrap's own evaluation (`Runtime.evaluate_change`) with its state under
`scratch/preview-<change id>/` and no outputs, so it shows what approving would compute; the
scratch space is deleted afterwards and no checkpoint names it (approval evaluates again, from
the committed checkpoint). The report, or why there is none, is kept as
`previews/<change id>.json` by the checkpoint store. `spec.preview.timeoutSeconds` bounds it: past
it, its Spark jobs are cancelled.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spindle.checkpoint import Manifest, StateRecord
from spindle.errors import SpindleError
from spindle.plan import ChangePlan
from spindle.plan.preview import (
    Changed,
    PreviewError,
    PreviewReport,
    ViewPreview,
    key_columns,
)
from spindle.program.queries import plain
from spindle.runtime.engine import Runtime, refuse_unless_allowed
from spindle.runtime.rows import collect

_IN_BEFORE, _IN_AFTER = "__in_before", "__in_after"


@dataclass(frozen=True)
class Bounds:
    """`spec.preview`: sample rows per kind, and seconds before the preview is cancelled."""

    sample_rows: int = 10
    timeout_seconds: float = 600.0


def refused(change_id: str, manifest: Manifest, *, request: str | None) -> PreviewReport:
    """The report of a preview pod whose change is no longer the pending one."""
    return PreviewReport(
        change_id=change_id,
        checkpoint=manifest.id,
        created_at=_now(),
        sample_rows=0,
        request=request,
        error=PreviewError(
            "ChangeMoved",
            f"Change {change_id} is no longer the pending change (the program or the "
            "checkpoint moved); nothing was previewed. Preview the pending change instead.",
        ),
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def preview(
    runtime: Runtime,
    plan: ChangePlan,
    manifest: Manifest,
    *,
    bounds: Bounds,
    request: str | None = None,
    stop: threading.Event | None = None,
) -> PreviewReport:
    """Preview `plan` from `manifest` and keep the report (or its error) beside the checkpoints.
    Never raises for a failed evaluation: the report says why (`PreviewFailed`,
    `PreviewTimedOut`, or the plan's refusal). `stop` (a served command's client pressed
    Ctrl-C, or left) cancels its Spark jobs, and it raises `KeyboardInterrupt` without a
    report: the cancelled jobs were kept as a `PreviewFailed` that said approving would fail."""
    created = _now()
    location = f"scratch/preview-{plan.change_id}"
    report = PreviewReport(
        change_id=plan.change_id,
        checkpoint=manifest.id,
        created_at=created,
        sample_rows=bounds.sample_rows,
        request=request,
    )
    deadline = _Deadline(runtime.spark, bounds.timeout_seconds, group=location, stop=stop)
    try:
        with deadline.running():
            refuse_unless_allowed(plan)
            state, _ = runtime.evaluate_change(plan, manifest, location=location, emit=False)
            views = tuple(
                _compare(runtime, plan, manifest, state, name, bounds.sample_rows)
                for name in plan.views_to_evaluate
            )
        report = replace(report, views=views)
    except SpindleError as error:
        report = replace(report, error=PreviewError(error.reason, error.message))
    except Exception as error:  # any evaluation failure becomes the report's error
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt from error
        report = replace(report, error=_failure(plan, error, timed_out=deadline.expired))
    finally:
        scratch = runtime.store.objects.scan(f"{location}/")
        runtime.store.objects.delete([item.key for item in scratch])
    if stop is not None and stop.is_set():  # asked to stop as it ended: no report either
        raise KeyboardInterrupt
    runtime.store.write_preview(report)
    return report


def _failure(plan: ChangePlan, error: Exception, *, timed_out: bool) -> PreviewError:
    again = (
        "The pending change is unchanged: preview it again (spindle.dev/preview, or "
        "`spindle local preview`), or approve it without a preview."
    )
    if timed_out:
        return PreviewError(
            "PreviewTimedOut",
            f"The preview of change {plan.change_id} ran past spec.preview.timeoutSeconds and "
            f"was cancelled. Raise the timeout if the views are large. {again}",
        )
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
    return PreviewError(
        "PreviewFailed",
        f"The preview of change {plan.change_id} failed while evaluating its views: {first}. "
        f"Approving would fail the same way; fix the SQL or the stored data. {again}",
    )


class _Deadline:
    """Cancels the preview's Spark jobs (one job group) once `seconds` have passed, or `stop`
    is set, and keeps cancelling new ones until the preview returns."""

    def __init__(
        self,
        spark: SparkSession,
        seconds: float,
        *,
        group: str,
        stop: threading.Event | None = None,
    ) -> None:
        self.spark, self.seconds, self.group, self.stop = spark, seconds, group, stop
        self.expired = False
        self._done = threading.Event()

    def _watch(self) -> None:
        ends = time.monotonic() + self.seconds
        while not self._done.wait(0.5):
            self.expired = self.expired or time.monotonic() >= ends
            if self.expired or (self.stop is not None and self.stop.is_set()):
                self.spark.sparkContext.cancelJobGroup(self.group)

    @contextmanager
    def running(self) -> Iterator[None]:
        context = self.spark.sparkContext
        context.setJobGroup(self.group, "spindle preview", interruptOnCancel=True)
        watcher = threading.Thread(target=self._watch, name="preview-deadline", daemon=True)
        watcher.start()
        try:
            yield
            if self.expired:  # the last job finished as the deadline passed: still too late
                raise TimeoutError(self.group)
        finally:
            self._done.set()
            watcher.join()
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _compare(
    runtime: Runtime,
    plan: ChangePlan,
    manifest: Manifest,
    state: dict[str, StateRecord],
    name: str,
    samples: int,
) -> ViewPreview:
    """One view's rows at the checkpoint against its rows after the change."""
    after = runtime.views(plan.new).contents(name, state[name])
    existed = name in plan.old.views and name in manifest.state
    if existed:
        before = runtime.views(plan.old).contents(name, manifest.state[name])
    else:
        before = runtime.spark.createDataFrame([], after.schema)
    wanted = [c.lower() for c in key_columns(plan.new.views[name])]
    keys = [c for c in after.columns if c.lower() in wanted]
    lowered = {c.lower() for c in before.columns}
    if len(keys) != len(wanted) or any(k.lower() not in lowered for k in keys):
        keys = []
    return _diff(
        name,
        "modified" if existed else "added",
        before=before,
        after=after,
        keys=keys,
        samples=samples,
    )


def _aligned(before: DataFrame, after: DataFrame) -> DataFrame:
    """`before` with `after`'s columns, in its order and types: NULL where it has none."""
    have = {c.lower(): c for c in before.columns}
    columns = []
    for field in after.schema.fields:
        source = have.get(field.name.lower())
        value = F.col(f"`{source}`") if source else F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return before.select(*columns)


@dataclass(frozen=True)
class _Pair:
    """One view's rows before (aligned to the new columns) and after, cached while compared."""

    name: str
    status: str
    before: DataFrame
    after: DataFrame
    samples: int
    counts: tuple[int, int]
    only: tuple[str, ...]
    """Columns only one side has (they changed in every matched row)."""


def _diff(
    name: str,
    status: str,
    *,
    before: DataFrame,
    after: DataFrame,
    keys: Sequence[str],
    samples: int,
) -> ViewPreview:
    """Rows added, removed and changed from `before` to `after`: matched on `keys`, or (none)
    as whole rows, counted with multiplicity."""
    now = {c.lower() for c in after.columns}
    was = {c.lower() for c in before.columns}
    only = [c for c in after.columns if c.lower() not in was] + [
        c for c in before.columns if c.lower() not in now
    ]
    aligned = _aligned(before, after).persist()
    after = after.persist()
    try:
        counts = (aligned.count(), after.count())
        pair = _Pair(name, status, aligned, after, samples, counts, tuple(only))
        return _keyed(pair, keys) if keys else _whole(pair)
    finally:
        aligned.unpersist()
        after.unpersist()


def _whole(pair: _Pair) -> ViewPreview:
    columns = pair.after.columns
    added = pair.after.exceptAll(pair.before)
    removed = pair.before.exceptAll(pair.after)
    return ViewPreview(
        name=pair.name,
        status=pair.status,
        matched_by=(),
        rows_before=pair.counts[0],
        rows_after=pair.counts[1],
        added=added.count(),
        removed=removed.count(),
        changed=0,
        changed_columns=pair.only,
        added_samples=_rows(added, columns, pair.samples),
        removed_samples=_rows(removed, columns, pair.samples),
    )


def _keyed(pair: _Pair, keys: Sequence[str]) -> ViewPreview:
    before, after, samples, only = pair.before, pair.after, pair.samples, pair.only
    values = [c for c in after.columns if c not in keys]
    old = before.select(
        *[F.col(f"`{c}`").alias(f"b_{i}") for i, c in enumerate(after.columns)],
        F.lit(True).alias(_IN_BEFORE),
    )
    new = after.select(
        *[F.col(f"`{c}`").alias(f"a_{i}") for i, c in enumerate(after.columns)],
        F.lit(True).alias(_IN_AFTER),
    )
    index = {c: i for i, c in enumerate(after.columns)}
    on = [F.col(f"a_{index[k]}").eqNullSafe(F.col(f"b_{index[k]}")) for k in keys]
    joined = new.join(old, on=_all(on), how="full_outer")
    matched = F.col(_IN_BEFORE).isNotNull() & F.col(_IN_AFTER).isNotNull()
    differs = {c: ~F.col(f"a_{index[c]}").eqNullSafe(F.col(f"b_{index[c]}")) for c in values}
    changed = matched & (_any(list(differs.values())) | F.lit(bool(only)))
    is_added, is_removed = F.col(_IN_BEFORE).isNull(), F.col(_IN_AFTER).isNull()
    joined = joined.persist()
    try:
        totals = joined.agg(
            F.sum(is_added.cast("long")).alias("added"),
            F.sum(is_removed.cast("long")).alias("removed"),
            F.sum(changed.cast("long")).alias("changed"),
            *[F.sum((matched & d).cast("long")).alias(f"d_{index[c]}") for c, d in differs.items()],
        ).first()
        assert totals is not None
        moved = [c for c in values if int(totals[f"d_{index[c]}"] or 0) > 0]
        side = {"a": [f"a_{index[c]}" for c in after.columns]}
        side["b"] = [f"b_{index[c]}" for c in after.columns]
        width = len(after.columns)
        ordered = [f"a_{index[k]}" for k in keys] + [f"b_{index[k]}" for k in keys]
        return ViewPreview(
            name=pair.name,
            status=pair.status,
            matched_by=tuple(keys),
            rows_before=pair.counts[0],
            rows_after=pair.counts[1],
            added=int(totals["added"] or 0),
            removed=int(totals["removed"] or 0),
            changed=int(totals["changed"] or 0),
            changed_columns=tuple(moved + [c for c in only if c not in moved]),
            added_samples=_rows(
                joined.filter(is_added).orderBy(*ordered).select(*side["a"]),
                after.columns,
                samples,
            ),
            removed_samples=_rows(
                joined.filter(is_removed).orderBy(*ordered).select(*side["b"]),
                after.columns,
                samples,
            ),
            changed_samples=tuple(
                Changed(before=_row(after.columns, r[width:]), after=_row(after.columns, r[:width]))
                for r in collect(
                    joined.filter(changed).orderBy(*ordered).select(*side["a"], *side["b"]),
                    limit=samples,
                )
            ),
        )
    finally:
        joined.unpersist()


def _all(conditions: list[Column]) -> Column:
    result = F.lit(True)
    for condition in conditions:
        result = result & condition
    return result


def _any(conditions: list[Column]) -> Column:
    result = F.lit(False)
    for condition in conditions:
        result = result | condition
    return result


def _row(columns: Sequence[str], values: Sequence[object]) -> dict[str, object]:
    return dict(zip(columns, (plain(v) for v in values), strict=True))


def _rows(frame: DataFrame, columns: Sequence[str], samples: int) -> tuple[dict[str, object], ...]:
    ordered = frame.orderBy(*frame.columns) if frame.columns else frame
    return tuple(_row(columns, row) for row in collect(ordered, limit=samples))
