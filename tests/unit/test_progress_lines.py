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


def test_what_steps_and_bootstraps_left_in_an_output_and_a_put_back_are_told_apart() -> None:
    lines: list[str] = []
    report = reporter(lines.append)
    report("output-discarded", connector="v.c", path="s3://b/out (version 4)")
    report("output-discarded", connector="v.c", path="s3://b/out (version 6)", by="abandoned")
    report("output-put-back", connector="v.c", path="s3://b/out (version 9)")
    report("output-undo-unfinished", connector="v.c", path="s3://b/out (versions 5-6)")
    assert lines == [
        "Removed s3://b/out (version 4) from output v.c: a previous step wrote it and did not "
        "commit; its changes reach the output with a later step.",
        "Removed s3://b/out (version 6) from output v.c: a bootstrap or a step that did not "
        "commit wrote it (a change since abandoned, or an attempt done again now, which writes "
        "what it must again).",
        "Put back s3://b/out (version 9) in output v.c: Spindle's undo of its writes there had "
        "also taken other writers' commits, and its driver stopped before it put them back. "
        "Their rows are back, and so are the ones it undid.",
        "Output v.c: other writers' commits are missing from s3://b/out (versions 5-6). "
        "Spindle's undo of its writes there took them too, its driver stopped before it put "
        "them back, and commits followed since, which putting them back would take. Write "
        "those rows again (DESCRIBE HISTORY shows what each version did).",
    ]
