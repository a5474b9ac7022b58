"""Reviewing a change before approving it, without Spark: the cost estimate (from Delta log
statistics and recorded throughput), restatement requests, and silent bootstrap in the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spindle.api import Phase, PipelineSpec
from spindle.checkpoint import Manifest, RateRecord, StateRecord
from spindle.checkpoint.objects import open_objects
from spindle.checkpoint.statistics import delta_size, needs_sizes, stored_sizes
from spindle.cli.render import estimate_lines
from spindle.lifecycle import Observation, decide
from spindle.plan import Rate, Stored, StoredSize, make_plan
from spindle.program import parse_program
from tests.checkpoints import manifest as next_checkpoint
from tests.unit.test_lifecycle import V1, V2

CHAIN = """
create table t (id bigint, v int) with ('materialized' = 'true');
create table u (id bigint, w int) with ('materialized' = 'true');
create table gone (id bigint) with ('materialized' = 'true');
create view a as select id, v from t where v > 0;
create view b as select a.id, v, w from a join u on a.id = u.id;
create view c as select id, w from u;
"""


def _add(path: str, size: int, rows: int | None) -> dict[str, Any]:
    stats = None if rows is None else json.dumps({"numRecords": rows})
    return {"add": {"path": path, "size": size, "stats": stats, "dataChange": True}}


def write_log(root: Path, commits: list[list[dict[str, Any]]], crc: dict[int, Any]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    for version, actions in enumerate(commits):
        text = "".join(json.dumps(a) + "\n" for a in [{"commitInfo": {}}, *actions])
        (log / f"{version:020d}.json").write_text(text)
    for version, body in crc.items():
        (log / f"{version:020d}.crc").write_text(json.dumps(body))


COMMITS = [
    [{"metaData": {}}],
    [_add("p1", 100, 3), _add("p2", 50, 2)],
    [{"remove": {"path": "p1"}}, _add("p3", 70, 4)],
]


def test_sizes_replay_the_json_commits_adds_minus_removes(tmp_path: Path) -> None:
    write_log(tmp_path, COMMITS, {})
    table = open_objects(tmp_path.as_uri())
    assert delta_size(table, 2) == StoredSize(rows=6, bytes=120)
    assert delta_size(table, 1) == StoredSize(rows=5, bytes=150)


def test_sizes_come_from_the_checksum_when_it_lists_the_files(tmp_path: Path) -> None:
    files = [{"path": "x", "size": 9, "stats": json.dumps({"numRecords": 11})}]
    write_log(tmp_path, COMMITS, {2: {"tableSizeBytes": 9, "allFiles": files}})
    assert delta_size(open_objects(tmp_path.as_uri()), 2) == StoredSize(rows=11, bytes=9)


def test_a_cleaned_up_log_or_missing_statistics_give_unknown_rows(tmp_path: Path) -> None:
    write_log(tmp_path / "cleaned", COMMITS, {2: {"tableSizeBytes": 120}})
    (tmp_path / "cleaned" / "_delta_log" / f"{0:020d}.json").unlink()
    assert delta_size(open_objects((tmp_path / "cleaned").as_uri()), 2) == StoredSize(None, 120)
    write_log(tmp_path / "nostats", [[_add("p", 10, None)]], {})
    assert delta_size(open_objects((tmp_path / "nostats").as_uri()), 0) == StoredSize(None, 10)


def test_stored_sizes_read_each_relation_at_its_checkpointed_version(tmp_path: Path) -> None:
    write_log(tmp_path / "state" / "t", COMMITS, {})
    checkpoint = next_checkpoint(None).model_copy(
        update={
            "state": {
                "t": StateRecord(kind="table", path="state/t", version=1),
                "e": StateRecord(kind="table", path="state/e", version=-1),
            }
        }
    )
    sizes = stored_sizes(open_objects(tmp_path.as_uri()), checkpoint)
    assert sizes == {"t": StoredSize(rows=5, bytes=150), "e": StoredSize(rows=0, bytes=0)}


SIZES = {
    "t": StoredSize(rows=10, bytes=1000),
    "u": StoredSize(rows=5, bytes=500),
    "gone": StoredSize(rows=7, bytes=70),
    "a": StoredSize(rows=8, bytes=80),
    "b": StoredSize(rows=4, bytes=40),
    "c": StoredSize(rows=5, bytes=50),
}


def test_the_estimate_counts_the_stored_relations_a_bootstrap_reads() -> None:
    new = CHAIN.replace("where v > 0", "where v > 1")
    plan = make_plan(old=parse_program(CHAIN), new=parse_program(new), stored=Stored(sizes=SIZES))
    estimate = plan.estimate
    assert estimate is not None
    # a is modified, b reads it (upstream): both evaluated; a reads t, b reads u (a is new)
    assert estimate.views == ("a", "b")
    assert estimate.reads == ("t", "u")
    assert (estimate.input_rows, estimate.input_bytes) == (15, 1500)
    assert estimate.connector_rows == 0
    assert estimate.duration() == "unknown" and estimate.rate is None
    body = estimate.to_json()
    assert body["connectorRows"] == 0 and "never a connector" in body["connectorRowsNote"]
    assert body["headline"] == "2 views to evaluate, 15 stored rows to read, duration unknown"


def test_a_truncated_table_is_read_empty_and_an_evolved_one_in_full() -> None:
    truncated = CHAIN.replace("u (id bigint, w int)", "u (id bigint, w bigint)")
    plan = make_plan(
        old=parse_program(CHAIN), new=parse_program(truncated), stored=Stored(sizes=SIZES)
    )
    assert plan.estimate is not None and plan.estimate.reads == ("a",)
    evolved = CHAIN.replace("u (id bigint, w int)", "u (id bigint, w int, note varchar)")
    plan = make_plan(
        old=parse_program(CHAIN), new=parse_program(evolved), stored=Stored(sizes=SIZES)
    )
    assert plan.estimate is not None and plan.estimate.reads == ("a", "u")


def test_the_estimate_names_the_tables_a_change_empties_and_the_inputs_read_again() -> None:
    """A breaking schema change drops a table's stored rows: the review says so, with their
    count, and which inputs are read again from their start (its own, and modified ones)."""
    feed = """'connectors' = '[{"name": "f", "transport": {"name": "file_input",
      "config": {"path": "/in/u"}}, "format": {"name": "json"}}]'"""
    old = CHAIN.replace(
        "with ('materialized' = 'true');\ncreate table gone",
        "with ('materialized' = 'true', " + feed + ");\ncreate table gone",
        1,
    )
    assert old != CHAIN
    truncated = old.replace("u (id bigint, w int)", "u (id bigint, w bigint)")
    plan = make_plan(
        old=parse_program(old), new=parse_program(truncated), stored=Stored(sizes=SIZES)
    )
    assert plan.estimate is not None
    assert plan.estimate.emptied == (("u", SIZES["u"].rows),)
    assert plan.estimate.restarted == ("u.f",)
    body = plan.estimate.to_json()
    assert body["tablesEmptied"] == [{"name": "u", "storedRows": SIZES["u"].rows}]
    assert body["inputsRestarted"] == ["u.f"]
    lines = estimate_lines(body)
    assert "  tables emptied by the change: u (5 stored rows dropped)" in lines
    assert "  inputs read again from their start after the bootstrap: u.f" in lines
    evolved = old.replace("u (id bigint, w int)", "u (id bigint, w int, note varchar)")
    kept = make_plan(old=parse_program(old), new=parse_program(evolved), stored=Stored(sizes=SIZES))
    assert kept.estimate is not None and (kept.estimate.emptied, kept.estimate.restarted) == (
        (),
        (),
    )
    assert not any(
        "emptied" in line or "read again" in line
        for line in estimate_lines(kept.estimate.to_json())
    )


def test_duration_uses_the_latest_bootstrap_rate_then_the_step_rate() -> None:
    new = parse_program(CHAIN.replace("where v > 0", "where v > 1"))
    old = parse_program(CHAIN)
    step = Rate(kind="step", rows=30, seconds=10.0)
    boot = Rate(kind="bootstrap", rows=100, seconds=10.0)
    with_step = make_plan(old=old, new=new, stored=Stored(sizes=SIZES, rates=(step,))).estimate
    assert with_step is not None and with_step.seconds == pytest.approx(5.0)
    both = make_plan(old=old, new=new, stored=Stored(sizes=SIZES, rates=(step, boot))).estimate
    assert both is not None and both.seconds == pytest.approx(1.5)
    assert both.to_json()["throughput"] == {"from": "bootstrap", "rowsPerSecond": 10.0}
    unknown = make_plan(old=old, new=new, stored=Stored(sizes=None, rates=(boot,))).estimate
    assert unknown is not None and unknown.input_rows is None and unknown.duration() == "unknown"
    assert unknown.unknown == ("t", "u")
    assert unknown.headline() == "2 views to evaluate, stored rows unknown, duration unknown"


def test_outputs_and_what_bootstrap_does_to_them() -> None:
    out = """'connectors' = '[{"name": "o", "transport": {"name": "file_output",
      "config": {"path": "/tmp/o"}}, "format": {"name": "json"}}]'"""
    old = CHAIN.replace("create view c as", f"create view c with ({out}) as")
    new = old.replace("select id, w from u", "select id, w + 1 as w from u")
    plan = make_plan(
        old=parse_program(old),
        new=parse_program(new),
        stored=Stored(sizes=SIZES, outputs_mode="silent"),
    )
    assert plan.estimate is not None
    assert plan.estimate.outputs == ("c.o",) and plan.estimate.outputs_mode == "silent"


# -- restatement ------------------------------------------------------------------------------


def test_a_restatement_modifies_the_views_and_their_dependents_with_its_own_id() -> None:
    program = parse_program(CHAIN)
    same = make_plan(old=program, new=program)
    assert not same.needs_approval
    plan = make_plan(old=program, new=program, restate=("a",), stored=Stored(sizes=SIZES))
    assert plan.needs_approval and plan.restate == ("a",)
    assert plan.diff.program_diff.modified_views == ("a", "b")
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "a": ("restate",),
        "b": ("restate",),
    }
    assert plan.views_to_evaluate == ("a", "b")
    assert plan.change_id != same.change_id
    assert plan.change_id != make_plan(old=program, new=program, restate=("c",)).change_id
    assert plan.change_id == make_plan(old=program, new=program, restate=("a", "a")).change_id
    assert plan.estimate is not None and plan.estimate.input_rows == 15


def observed(checkpoint: Manifest, sql: str, **fields: Any) -> Observation:
    return Observation(
        spec=PipelineSpec(sql=sql),
        generation=1,
        checkpoint=checkpoint,
        start_requested=False,
        name="grades",
        **fields,
    )


def test_a_restatement_request_awaits_approval_then_is_served_once() -> None:
    checkpoint = next_checkpoint(None, program=V1)
    decision = decide(observed(checkpoint, V1, restate="avg_grade@1"))
    assert decision.pending_change is not None
    assert decision.pending_change.reason == "restate"
    assert decision.pending_change.diff.program_diff.modified_views == [
        "avg_grade",
        "avg_grade_enriched",
    ]
    assert decision.reason == "AwaitingApproval"
    served = checkpoint.model_copy(update={"restated": "avg_grade@1"})
    assert decide(observed(served, V1, restate="avg_grade@1")).pending_change is None
    # asking again is a change of its own: the approval of the last request, left in place,
    # bootstrapped it at once (with `onBootstrap: replace`, replacing the outputs unasked)
    again = decide(observed(served, V1, restate="avg_grade@2", approval=decision.change_id))
    assert again.pending_change is not None and again.change_id != decision.change_id
    assert (again.phase, again.reason) == (Phase.AWAITING_APPROVAL, "AwaitingApproval")


def test_a_restatement_names_views_as_sql_does() -> None:
    """Unquoted names fold to lower case, as in the program (`local restate grades AVG_GRADE`
    was an unknown view); a quoted view's name keeps its case."""
    checkpoint = next_checkpoint(None, program=V1)
    folded = decide(observed(checkpoint, V1, restate="AVG_Grade@1"))
    assert folded.pending_change is not None
    lower = decide(observed(checkpoint, V1, restate="avg_grade@1")).pending_change
    assert lower is not None and folded.pending_change.diff == lower.diff  # the same views
    # each spelling is a request of its own, as the checkpoint records the one it served
    served = checkpoint.model_copy(update={"restated": "avg_grade@1"})
    for again in ("AVG_Grade@1", "avg_grade@ 1", " avg_grade @1"):
        respelt = decide(observed(served, V1, restate=again, approval=lower.id))
        assert respelt.phase is Phase.AWAITING_APPROVAL and respelt.change_id != lower.id
    quoted = V1 + '\ncreate view "Top" as select * from avg_grade;\n'
    checkpoint = next_checkpoint(None, program=quoted)
    assert decide(observed(checkpoint, quoted, restate="Top@1")).pending_change is not None
    assert decide(observed(checkpoint, quoted, restate="top@1")).reason == "UnknownRelation"


def test_a_restatement_of_an_unknown_view_fails_saying_what_to_do() -> None:
    checkpoint = next_checkpoint(None, program=V1)
    decision = decide(observed(checkpoint, V1, restate="avg_grade,nope"))
    assert decision.reason == "UnknownRelation"
    assert "'nope'" in decision.message and "spindle.dev/restate" in decision.message
    assert "avg_grade_enriched" in decision.message  # the views it could name
    table = decide(observed(checkpoint, V1, restate="grades"))
    assert table.reason == "UnknownRelation"


def test_sizes_are_read_only_when_there_is_something_to_estimate() -> None:
    checkpoint = next_checkpoint(None, program=V1)
    runtime = checkpoint.runtime_version
    assert not needs_sizes(None, sql=V2, runtime=runtime, restate=None)
    assert not needs_sizes(checkpoint, sql=V1, runtime=runtime, restate=None)
    assert needs_sizes(checkpoint, sql=V2, runtime=runtime, restate=None)
    assert needs_sizes(checkpoint, sql=V1, runtime=runtime, restate="avg_grade")
    served = checkpoint.model_copy(update={"restated": "avg_grade"})
    assert not needs_sizes(served, sql=V1, runtime=runtime, restate="avg_grade")


def test_the_pending_change_carries_the_estimate_with_recorded_throughput() -> None:
    checkpoint = next_checkpoint(None, program=V1).model_copy(
        update={"throughput": {"step": RateRecord(rows=20, seconds=4.0, checkpoint="x")}}
    )
    sizes = {"grades": StoredSize(rows=8, bytes=800), "students": StoredSize(rows=2, bytes=20)}
    decision = decide(observed(checkpoint, V2, sizes=sizes))
    assert decision.pending_change is not None
    estimate = decision.pending_change.estimate
    assert estimate is not None
    assert estimate["inputRows"] == 10 and estimate["durationSeconds"] == 2.0
    assert estimate["headline"] == "3 views to evaluate, 10 stored rows to read, duration ~2s"


def test_silent_is_an_output_mode_of_the_spec() -> None:
    spec = PipelineSpec.model_validate({"sql": "", "outputs": {"onBootstrap": "silent"}})
    assert spec.outputs.on_bootstrap == "silent"
    with pytest.raises(ValueError, match="onBootstrap"):
        PipelineSpec.model_validate({"sql": "", "outputs": {"onBootstrap": "quiet"}})


def test_kubectl_spindle_shows_the_estimate_before_approving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spindle.cli.kubectl_plugin import _show

    checkpoint = next_checkpoint(None, program=V1)
    sizes = {"grades": StoredSize(rows=8, bytes=800), "students": StoredSize(rows=2, bytes=20)}
    pending = decide(observed(checkpoint, V1, restate="avg_grade", sizes=sizes)).pending_change
    assert pending is not None
    _show(pending.model_dump(mode="json"))
    out = capsys.readouterr().out
    assert "Reason: restate" in out
    assert "Estimate: 2 views to evaluate, 10 stored rows to read, duration unknown" in out
    assert "stored state read: 10 rows, 820 bytes (grades, students)" in out
    assert "rows read from connectors: 0" in out


def test_an_unreadable_log_is_an_unknown_size_not_a_failure(tmp_path: Path) -> None:
    write_log(tmp_path / "state" / "t", [[_add("p", 10, 2)]], {})
    (tmp_path / "state" / "t" / "_delta_log" / f"{0:020d}.json").write_text("{not json")
    checkpoint = next_checkpoint(None).model_copy(
        update={"state": {"t": StateRecord(kind="table", path="state/t", version=0)}}
    )
    sizes = stored_sizes(open_objects(tmp_path.as_uri()), checkpoint)
    assert sizes == {"t": StoredSize(rows=None, bytes=None)}
