"""What approving a change will cost, before it runs: a frozen `Estimate`, with no Spark job.

Pure: the sizes of stored relations (from the Delta log statistics of the checkpointed versions)
and the throughput earlier checkpoints recorded are given as data by the body that observed
them. A bootstrap reads stored state only, never a connector, so its connector rows are 0.
Which stored relations it scans is the runtime's rule (`runtime.engine.Runtime.bootstrap`):
every relation a view to evaluate reads that is not itself evaluated, and that keeps its
checkpointed rows (unchanged tables and views, and tables that only gain nullable columns);
a table that is new or truncated is read empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spindle.program import Program
from spindle.wording import counted

OUTPUT_MODES = ("replace", "append", "silent")


@dataclass(frozen=True)
class StoredSize:
    """One stored relation at its checkpointed Delta version, from the Delta log: the rows a
    scan reads (`numRecords` of its data files) and their bytes; None when the log does not
    say (files written without statistics, or a log already cleaned up)."""

    rows: int | None
    bytes: int | None


@dataclass(frozen=True)
class Rate:
    """Rows per second measured by one earlier step or bootstrap of this pipeline."""

    kind: str  # "bootstrap" | "step"
    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float | None:
        return self.rows / self.seconds if self.seconds > 0 and self.rows > 0 else None


@dataclass(frozen=True)
class Estimate:
    views: tuple[str, ...]
    """The views the bootstrap evaluates, in dependency order."""
    reads: tuple[str, ...]
    """The stored relations it scans (checkpointed state)."""
    input_rows: int | None
    input_bytes: int | None
    unknown: tuple[str, ...]
    """Relations read whose size the checkpoint's statistics do not give (or all, with none)."""
    outputs: tuple[str, ...]
    """Output connectors of the views evaluated (`relation.connector`)."""
    outputs_mode: str
    """What happens to them: replaced, appended to, or left alone (`silent`)."""
    seconds: float | None
    rate: Rate | None
    emptied: tuple[tuple[str, int | None], ...] = ()
    """Modified tables whose stored rows the bootstrap drops (a breaking schema change), each
    with its stored row count (None: unknown)."""
    restarted: tuple[str, ...] = ()
    """Input connectors read again from their start once the bootstrap committed (added,
    modified, or of an emptied table)."""

    @property
    def connector_rows(self) -> int:
        """A bootstrap reads no input connector: always 0."""
        return 0

    def duration(self) -> str:
        return "unknown" if self.seconds is None else _seconds(self.seconds)

    def headline(self) -> str:
        """Views, rows, duration: one line (the Argo CD health message shows it)."""
        views = counted(len(self.views), "view")
        rows = (
            "stored rows unknown"
            if self.input_rows is None
            else f"{self.input_rows:,} stored rows to read"
        )
        return f"{views} to evaluate, {rows}, duration {self.duration()}"

    def to_json(self) -> dict[str, Any]:
        rate = self.rate
        return {
            "headline": self.headline(),
            "viewsToEvaluate": list(self.views),
            "storedRelationsRead": list(self.reads),
            "inputRows": self.input_rows,
            "inputBytes": self.input_bytes,
            "sizesUnknown": list(self.unknown),
            "connectorRows": self.connector_rows,
            "connectorRowsNote": "a bootstrap reads stored state only, never a connector",
            "outputs": list(self.outputs),
            "outputsOnBootstrap": self.outputs_mode,
            "duration": self.duration(),
            "durationSeconds": None if self.seconds is None else round(self.seconds, 1),
            "throughput": None
            if rate is None or rate.rows_per_second is None
            else {"from": rate.kind, "rowsPerSecond": round(rate.rows_per_second, 1)},
            "tablesEmptied": [{"name": n, "storedRows": rows} for n, rows in self.emptied],
            "inputsRestarted": list(self.restarted),
        }


def _seconds(value: float) -> str:
    if value < 1:
        return "under 1s"
    if value < 120:
        return f"~{round(value)}s"
    if value < 7200:
        return f"~{round(value / 60)}m"
    return f"~{value / 3600:.1f}h"


def stored_reads(*, new: Program, views: tuple[str, ...], kept: frozenset[str]) -> tuple[str, ...]:
    """The relations of `kept` (checkpointed state the bootstrap keeps) that `views` read."""
    evaluated = set(views)
    read = {dep for name in views for dep in new.views[name].dependencies if dep not in evaluated}
    return tuple(sorted(read & kept))


def make_estimate(
    *,
    new: Program,
    views: tuple[str, ...],
    kept: frozenset[str],
    sizes: Mapping[str, StoredSize] | None,
    rates: tuple[Rate, ...] = (),
    outputs_mode: str = "replace",
    emptied: tuple[str, ...] = (),
    restarted: tuple[str, ...] = (),
) -> Estimate:
    """The estimate of evaluating `views` of `new`, reading the checkpointed relations of
    `kept` that they read, and emptying the tables of `emptied` (their stored rows dropped).
    Duration: rows over the rate of the latest bootstrap recorded, else of the latest step;
    unknown with no history or unknown sizes."""
    reads = stored_reads(new=new, views=views, kept=kept)
    known = {n: sizes[n] for n in reads if sizes is not None and n in sizes}
    unknown = tuple(n for n in reads if n not in known or known[n].rows is None)
    rows = None if unknown else sum(s.rows or 0 for s in known.values())
    size_unknown = any(n not in known or known[n].bytes is None for n in reads)
    data = None if size_unknown else sum(s.bytes or 0 for s in known.values())
    usable = [r for r in rates if r.rows_per_second is not None]
    rate = next((r for kind in ("bootstrap", "step") for r in usable if r.kind == kind), None)
    speed = rate.rows_per_second if rate else None
    seconds = None if rows is None or speed is None else rows / speed
    outputs = tuple(c.key for name in views for c in new.views[name].connectors)
    return Estimate(
        views=views,
        reads=reads,
        input_rows=rows,
        input_bytes=data,
        unknown=unknown,
        outputs=outputs,
        outputs_mode=outputs_mode,
        seconds=seconds,
        rate=rate if speed is not None else None,
        emptied=tuple((n, sizes[n].rows if sizes and n in sizes else None) for n in emptied),
        restarted=restarted,
    )
