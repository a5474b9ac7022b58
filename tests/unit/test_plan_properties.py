"""Properties of the plan over generated programs (hypothesis)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.plan import make_plan
from spindle.program import fingerprint, parse_program
from tests.unit.programs import ProgramSpec, Style, leaf_views, programs, render, styles

PLAIN = Style(False, False, False, True, False, "a")


@settings(max_examples=150, deadline=None)
@given(programs())
def test_a_program_never_differs_from_itself(spec: ProgramSpec) -> None:
    program = parse_program(render(spec, PLAIN))
    plan = make_plan(old=program, new=program)
    assert plan.diff.is_empty and not plan.changes


@settings(max_examples=150, deadline=None)
@given(programs(), styles, styles)
def test_reformatting_is_never_a_change(spec: ProgramSpec, one: Style, two: Style) -> None:
    old, new = parse_program(render(spec, one)), parse_program(render(spec, two))
    plan = make_plan(old=old, new=new)
    assert plan.diff.is_empty, plan.to_json()
    assert fingerprint(old).program == fingerprint(new).program


@settings(max_examples=100, deadline=None)
@given(programs(), st.data())
def test_renaming_a_leaf_view_is_one_removal_and_one_addition(
    spec: ProgramSpec, data: st.DataObject
) -> None:
    leaf = data.draw(st.sampled_from(leaf_views(spec)))
    renamed = replace(
        spec,
        views=tuple(replace(v, name=f"{v.name}_new") if v.name == leaf else v for v in spec.views),
    )
    plan = make_plan(
        old=parse_program(render(spec, PLAIN)), new=parse_program(render(renamed, PLAIN))
    )
    assert plan.diff.program_diff.to_json() == {
        "added_tables": [],
        "removed_tables": [],
        "modified_tables": [],
        "added_views": [f"{leaf}_new"],
        "removed_views": [leaf],
        "modified_views": [],
    }


@settings(max_examples=60, deadline=None)
@given(programs(), st.data())
def test_changing_a_view_modifies_exactly_it_and_its_readers(
    spec: ProgramSpec, data: st.DataObject
) -> None:
    target = data.draw(st.sampled_from([v.name for v in spec.views]))
    changed = replace(
        spec,
        views=tuple(
            replace(v, threshold=v.threshold + 100) if v.name == target else v for v in spec.views
        ),
    )
    new = parse_program(render(changed, PLAIN))
    plan = make_plan(old=parse_program(render(spec, PLAIN)), new=new)
    readers = {target}
    for view in new.views.values():
        if set(view.dependencies) & readers:
            readers.add(view.name)
    assert set(plan.diff.program_diff.modified_views) == readers
    assert plan.changes[target].reasons == ("query",)


SCRIPT = """
import json, sys
from spindle.plan import make_plan
from spindle.program import fingerprint, parse_program
old, new = (parse_program(open(p).read()) for p in sys.argv[1:3])
fp = fingerprint(new)
print(json.dumps({"program": fp.program, "views": dict(fp.views),
                  "change_id": make_plan(old=old, new=new).change_id}))
"""


def test_fingerprints_and_change_id_are_identical_across_processes() -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", SCRIPT, "examples/grades/v1.sql", "examples/grades/v2.sql"],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        for seed in ("1", "2", "random")
    ]
    assert runs[0] == runs[1] == runs[2]
    assert len(json.loads(runs[0])["views"]) == 3


def test_change_id_depends_on_both_programs_and_the_runtime() -> None:
    v1 = parse_program(Path("examples/grades/v1.sql").read_text())
    v2 = parse_program(Path("examples/grades/v2.sql").read_text())
    ids = {
        make_plan(old=v1, new=v2).change_id,
        make_plan(old=v2, new=v1).change_id,
        make_plan(old=v1, new=v2, runtime="v2").change_id,
    }
    assert len(ids) == 3


def test_a_runtime_change_modifies_every_view() -> None:
    v1 = parse_program(Path("examples/grades/v1.sql").read_text())
    plan = make_plan(old=v1, new=v1, old_runtime="v0", runtime="v1")
    assert plan.diff.program_diff.modified_views == ("avg_grade", "avg_grade_enriched")
    assert all(c.reasons == ("runtime",) for c in plan.changes.values())
    assert plan.diff.program_diff.modified_tables == ()


def test_first_start_needs_no_approval() -> None:
    plan = make_plan(old=None, new=parse_program(Path("examples/grades/v1.sql").read_text()))
    assert plan.first_start and not plan.needs_approval
    assert plan.diff.program_diff.added_tables == ("grades", "students")
