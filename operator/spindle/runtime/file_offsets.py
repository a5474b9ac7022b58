"""`file_input` offsets: a modification-time high-water mark plus the files near it.

Why: an offset is stored in every checkpoint and step intent, so it must not grow with the
number of files ever ingested. The rule (after Spark's file stream source and Flink's file
monitor) orders files by `(modification time, path)` and remembers:

- `mark`: the newest modification time (ms) of any ingested file;
- `floor`: `mark - window`, never lower than it was: every file older than it was ingested or
  skipped, so a wider `late_arrival_seconds` never makes an ingested file new again (it
  widens the window only as the mark moves on);
- `seen`: the ingested files whose modification time is at least `floor`.

A listed file is *new* when its modification time is `>= floor` and it is not in `seen`. So
a file that becomes visible late, with an older modification time than files already ingested
(a slow upload, a rename of an old temporary file), is still ingested if its time is within
`window` of the mark; a file older than that is skipped. Files are treated as
immutable: rewriting an ingested file in place is not a new file while it is in `seen`.

The offset is O(files modified within `window` of the mark), independent of history. A legacy
offset (the sorted list of every ingested file, manifest format 1) reads as `mark = None`: new
is then "not in `seen`", and the first step that ingests sets a mark and drops the list. An
offset without a floor (written before it was kept) reads its floor as `mark - window`.

Pure: the caller lists `(path, modification ms)` pairs; nothing here touches storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Listing = Sequence[tuple[str, int]]
"""Files as listed: `(path, modification time in ms since the epoch)`."""


@dataclass(frozen=True)
class FileOffset:
    mark: int | None
    seen: frozenset[str]
    floor: int | None = None
    since: int | None = None
    """The oldest modification time the step that made this offset could take (the offset
    before it, under the window then): a replay takes what that step took whatever the
    window is now (`between`)."""

    @classmethod
    def parse(cls, value: Any) -> FileOffset:
        """From a stored offset: None (nothing ingested), a legacy list, or `{mark, seen}`
        (and `floor`)."""
        if value is None:
            return cls(None, frozenset())
        if isinstance(value, list):
            return cls(None, frozenset(str(v) for v in value))
        mark, floor, since = value.get("mark"), value.get("floor"), value.get("since")
        return cls(
            None if mark is None else int(mark),
            frozenset(value.get("seen") or ()),
            None if floor is None else int(floor),
            None if since is None else int(since),
        )

    def to_json(self) -> dict[str, Any]:
        bounds = {k: v for k, v in (("floor", self.floor), ("since", self.since)) if v is not None}
        return {"mark": self.mark, "seen": sorted(self.seen), **bounds}

    def lowest(self, *, window: int) -> int | None:
        """The oldest modification time a new file may have (None: any)."""
        if self.mark is None:
            return None
        moved = self.mark - window
        return moved if self.floor is None else max(self.floor, moved)

    def is_new(self, path: str, modified: int, *, window: int) -> bool:
        if path in self.seen:
            return False
        lowest = self.lowest(window=window)
        return lowest is None or modified >= lowest

    def after(
        self, taken: Listing, listing: Listing, *, window: int, now: int | None = None
    ) -> FileOffset:
        """The offset once `taken` (new files, in order) is ingested. The mark moves no
        further than `now` (ms; the listing's time): one file dated ahead of the clock (a
        skewed writer, `touch`) moved it there, and every file written until then was older
        than the floor, skipped without a word. A file dated ahead stays in `seen` until the
        floor passes its time, so it is not taken twice."""
        if not taken:
            return self
        mark = max([m for _, m in taken] + ([self.mark] if self.mark is not None else []))
        if now is not None:  # never below the mark it had
            mark = min(mark, max(now, self.mark if self.mark is not None else now))
        before = self.lowest(window=window)
        floor = mark - window if before is None else max(before, mark - window)
        times = dict(listing)
        ingested = self.seen | {p for p, _ in taken}
        return FileOffset(
            mark,
            frozenset(p for p in ingested if p in times and times[p] >= floor),
            floor,
            before,
        )


def plan(
    offset: FileOffset, listing: Listing, *, window: int, limit: int | None, now: int | None = None
) -> tuple[list[str], FileOffset]:
    """The files one step ingests, oldest first (at most `limit`), and the offset after them
    (`now`: when `listing` was made, in ms, `FileOffset.after`)."""
    new = sorted(
        ((p, m) for p, m in listing if offset.is_new(p, m, window=window)),
        key=lambda item: (item[1], item[0]),
    )
    taken = new[:limit] if limit else new
    return [p for p, _ in taken], offset.after(taken, listing, window=window, now=now)


def between(before: FileOffset, wanted: FileOffset, listing: Listing, *, window: int) -> list[str]:
    """The files new after `before` and no longer new after `wanted`: what a step that moved
    the offset from one to the other ingested (a crashed step's plan, replayed), by the bounds
    that step planned with (`since`, `floor`), not the window now."""
    if wanted == before:  # the step took nothing
        return []
    since = wanted.since if wanted.since is not None else before.lowest(window=window)

    def was_new(path: str, modified: int) -> bool:
        return path not in before.seen and (since is None or modified >= since)

    def still_new(path: str, modified: int) -> bool:  # as the step left it: its own floor
        if wanted.floor is None:
            return wanted.is_new(path, modified, window=window)
        return path not in wanted.seen and modified >= wanted.floor

    return [
        p
        for p, m in sorted(listing, key=lambda item: (item[1], item[0]))
        if was_new(p, m) and not still_new(p, m)
    ]
