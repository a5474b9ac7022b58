"""The runtime's progress events as the lines a person reads (driver log, `spindle` CLI)."""

from __future__ import annotations

from spindle.runtime.loop import reporter


def test_a_compaction_a_consolidation_and_a_rollback_are_told_and_a_view_event_is_not() -> None:
    lines: list[str] = []
    report = reporter(lines.append)
    report("compacted", relation="totals", files=33, into=1, consolidated=False)
    report("compacted", relation="live", files=34, into=1, consolidated=True)
    report("view", view="totals", mode="incremental", changes=4)
    report("rollback", relation="events", version=7)
    assert lines == [
        "Compacted totals: 33 small files into 1.",
        "Consolidated live: 34 files into 1, cancelled rows removed.",
        "Rolled back events to version 7 (a previous step did not commit).",
    ]
